package appliance_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"holon.dev/holon/appliance"
	"holon.dev/holon/backup"
	"holon.dev/holon/journal"
	"holon.dev/holon/kv"
)

// benchStore is a dev gateway's store holding n files of 40 KB each.
func benchStore(b *testing.B, n int) appliance.Config {
	b.Helper()
	cfg := appliance.Config{OpenStore: kv.OpenStore, Backup: backup.StoreHandler, DB: filepath.Join(b.TempDir(), "holon.db"), Registry: []string{"agents", "examples"},
		SignupCredit: journal.MustParseAmount("1000.00"), NoSync: true}
	app, err := appliance.Open(context.Background(), cfg)
	if err != nil {
		b.Fatal(err)
	}
	defer app.Close()
	chunk := bytes.Repeat([]byte("x"), 40<<10)
	for i := range n {
		copy(chunk, fmt.Sprintf("file %d", i))
		w := httptest.NewRecorder()
		app.Handler().ServeHTTP(w, httptest.NewRequest("POST", "/v0/files?mandate=alice/sandbox", bytes.NewReader(chunk)))
		if w.Code != http.StatusCreated {
			b.Fatalf("upload %d: %d %s", i, w.Code, w.Body)
		}
	}
	return cfg
}

// BenchmarkFiles_Open measures the gateway's start with no file stored and
// with 1,000 and 4,000 (160 MB): nothing of the files is read at start-up.
func BenchmarkFiles_Open(b *testing.B) {
	for _, n := range []int{0, 1000, 4000} {
		b.Run(fmt.Sprintf("files=%d", n), func(b *testing.B) {
			cfg := benchStore(b, n)
			for b.Loop() {
				app, err := appliance.Open(context.Background(), cfg)
				if err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				app.Close()
				b.StartTimer()
			}
		})
	}
}

// BenchmarkFiles_Call measures a call (one commit to reserve, one to
// settle; csv-profile is free, so the budget never runs out) with no file stored and with 1,000: file records are not on
// the commit path.
func BenchmarkFiles_Call(b *testing.B) {
	for _, n := range []int{0, 1000} {
		b.Run(fmt.Sprintf("files=%d", n), func(b *testing.B) {
			app, err := appliance.Open(context.Background(), benchStore(b, n))
			if err != nil {
				b.Fatal(err)
			}
			defer app.Close()
			body := `{"mandate": "alice/sandbox", "agent": "holon-labs/csv-profile", "input": {"csv": "a,b\n1,2\n"}}`
			for b.Loop() {
				w := httptest.NewRecorder()
				app.Handler().ServeHTTP(w, httptest.NewRequest("POST", "/v0/calls", strings.NewReader(body)))
				if w.Code != http.StatusOK {
					b.Fatalf("call: %d %s", w.Code, w.Body)
				}
			}
		})
	}
}
