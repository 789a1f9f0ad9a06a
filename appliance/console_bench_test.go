package appliance_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"holon.dev/holon"
	"holon.dev/holon/appliance"
	"holon.dev/holon/backup"
	"holon.dev/holon/journal"
	"holon.dev/holon/kv"
)

// fillReceipts writes n finished receipts under alice/sandbox, one in a
// hundred failed and not billed, a millisecond apart, in large
// transactions; it returns when the first was created.
func fillReceipts(b *testing.B, path string, n int) time.Time {
	s, err := kv.OpenStore(path, holon.StoreOptions{NoSync: true})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	price := journal.MustParseAmount("0.08")
	shares, err := journal.Split(price, "holon-labs", nil)
	if err != nil {
		b.Fatal(err)
	}
	agent := "holon-labs/company-lookup@1.0.0"
	failed := "not_found"
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	const perTx = 50_000
	for first := 0; first < n; first += perTx {
		err := s.Update(context.Background(), func(tx holon.Tx) error {
			for i := first; i < min(first+perTx, n); i++ {
				id, err := tx.NewReceiptID()
				if err != nil {
					return err
				}
				r := &holon.Receipt{
					ID: id, Mandate: "alice/sandbox", Caller: "alice/assistant", Agent: &agent, Status: "succeeded",
					WorstCase: &price, Currency: "EUR", Payer: "alice", Billed: true,
					Cost: holon.Cost{Own: price, Total: price}, Splits: shares, Children: []string{}, DurationMS: 1,
					Created: start.Add(time.Duration(i) * time.Millisecond),
				}
				if i%100 == 99 {
					r.Status, r.Error, r.Billed, r.Cost, r.Splits = "failed", &failed, false, holon.Cost{}, []journal.Share{}
				}
				if err := tx.PutReceipt(r); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	return start
}

// BenchmarkConsole_Receipts measures the receipts page of the console (one
// page of 50 through the in-process API, rendered) over a store of
// HOLON_BENCH_RECEIPTS receipts (default 1,000,000: building them takes a
// minute and ~750 MB of temporary disk).
func BenchmarkConsole_Receipts(b *testing.B) {
	n := 1_000_000
	if s := os.Getenv("HOLON_BENCH_RECEIPTS"); s != "" {
		var err error
		if n, err = strconv.Atoi(s); err != nil || n < 1000 {
			b.Fatalf("HOLON_BENCH_RECEIPTS=%q: want a number of at least 1000", s)
		}
	}
	path := filepath.Join(b.TempDir(), "holon.db")
	start := fillReceipts(b, path, n)
	app, err := appliance.Open(context.Background(), appliance.Config{OpenStore: kv.OpenStore, Backup: backup.StoreHandler, DB: path, Registry: []string{"agents", "examples"},
		SignupCredit: journal.MustParseAmount("5.00"), NoSync: true})
	if err != nil {
		b.Fatal(err)
	}
	defer app.Close()
	srv := httptest.NewServer(app.Handler())
	defer srv.Close()
	mid := start.Add(time.Duration(n/2) * time.Millisecond).Format(time.RFC3339Nano)
	for _, c := range []struct{ name, query string }{
		{"newest", ""},
		{"middle", "before=r" + strconv.Itoa(n/2)},
		{"oldest", "before=r60"},
		{"mandate", "mandate=alice/sandbox"},
		{"status=failed", "status=failed"},
		{"until=middle", "until=" + mid},
		{"billed=false&until=middle", "billed=false&until=" + mid},
	} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				resp, err := http.Get(srv.URL + "/console/receipts?" + c.query)
				if err != nil {
					b.Fatal(err)
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					b.Fatalf("%s: %d", c.query, resp.StatusCode)
				}
			}
		})
	}
	b.ReportMetric(float64(n), "receipts")
}
