package bench

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"testing"
)

// BenchmarkGateway_PostCall measures row 1's call on the server's side
// alone, in allocations, time and the process's CPU time per call: POST /v0/calls through the
// gateway's handler (the front door, the API, the engine, the in-process
// agent and the store's commit), one call after another, with no network
// and no client; and row 1b's, through a hosted gateway with an agent key
// and a fresh Idempotency-Key on every call. One caller makes each commit
// hold one update, so the allocations per call do not depend on how calls
// happen to group: two builds compare exactly. The store lives in
// $HOLON_BENCH_DIR when set (/dev/shm makes its fdatasyncs free), else in a
// temporary directory.
func BenchmarkGateway_PostCall(b *testing.B) {
	b.Run("dev", func(b *testing.B) { benchmarkPostCall(b, false) })
	b.Run("hosted", func(b *testing.B) { benchmarkPostCall(b, true) })
}

func benchmarkPostCall(b *testing.B, hosted bool) {
	ctx := context.Background()
	dir := b.TempDir()
	if d := os.Getenv("HOLON_BENCH_DIR"); d != "" {
		var err error
		if dir, err = os.MkdirTemp(d, "holon-bench-"); err != nil {
			b.Fatal(err)
		}
		defer os.RemoveAll(dir)
	}
	g, err := openGateway(ctx, gatewayConfig{dir: dir, hosted: hosted})
	if err != nil {
		b.Fatal(err)
	}
	defer g.Close()
	h := g.srv.Handler
	body := fmt.Appendf(nil, `{"mandate":%q,"agent":%q,"input":{"n":1}}`, mandateID(0), agentEcho)
	var key string
	if hosted {
		if key, err = hostedPayer(ctx, httpClient(1), g.url, "bench00"); err != nil {
			b.Fatal(err)
		}
		body = fmt.Appendf(nil, `{"mandate":"bench00/bench","agent":%q,"input":{"n":1}}`, agentEcho)
	}
	n := 0
	call := func() {
		req := httptest.NewRequest(http.MethodPost, "http://127.0.0.1/v0/calls", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		if hosted {
			n++
			req.Header.Set("Authorization", "Bearer "+key)
			req.Header.Set("Idempotency-Key", "bench-"+strconv.Itoa(n))
		}
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
	cpu0 := cpuTime()
	for range b.N {
		call()
	}
	b.StopTimer()
	b.ReportMetric(float64((cpuTime()-cpu0).Microseconds())/float64(b.N), "cpu-µs/call")
}
