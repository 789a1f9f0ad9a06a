package bench

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"testing"
)

// BenchmarkGateway_PostCall measures row 1's call on the server's side
// alone, in allocations and time per call: POST /v0/calls through the
// gateway's handler (the front door, the API, the engine, the in-process
// agent and the store's commit), one call after another, with no network
// and no client. One caller makes each commit hold one update, so the
// allocations per call do not depend on how calls happen to group: two
// builds compare exactly. The store lives in $HOLON_BENCH_DIR when set
// (/dev/shm makes its fdatasyncs free), else in a temporary directory.
func BenchmarkGateway_PostCall(b *testing.B) {
	dir := b.TempDir()
	if d := os.Getenv("HOLON_BENCH_DIR"); d != "" {
		var err error
		if dir, err = os.MkdirTemp(d, "holon-bench-"); err != nil {
			b.Fatal(err)
		}
		defer os.RemoveAll(dir)
	}
	g, err := openGateway(context.Background(), gatewayConfig{dir: dir})
	if err != nil {
		b.Fatal(err)
	}
	defer g.Close()
	h := g.srv.Handler
	body := fmt.Appendf(nil, `{"mandate":%q,"agent":%q,"input":{"n":1}}`, mandateID(0), agentEcho)
	call := func() {
		req := httptest.NewRequest(http.MethodPost, "http://127.0.0.1/v0/calls", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		if w.Code != http.StatusOK {
			b.Fatalf("POST /v0/calls: %d %s", w.Code, w.Body)
		}
	}
	for range 100 {
		call()
	}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		call()
	}
}
