package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"holon.dev/holon"
)

// Ensure that a store written by the code as it was before calls to
// in-process agents kept their reservations in memory (kv/testdata: a
// delegated run approved and run, idempotent calls and a replay, a
// rejected approval, refusals; written by holon serve on 2026-12-01), and
// one written by the code as it was before the receipt index's log (the
// same, then six calls under two mandates with Idempotency-Keys and a
// refusal, by holon serve on 2026-12-03, file format 1), opens and
// verifies, serves on top of what it holds (a billed call after its
// receipts, a replay of an Idempotency-Key it recorded) and verifies
// again.
func TestServe_StoreWrittenBefore(t *testing.T) {
	for _, tt := range []struct {
		file, key, replay string
		last              uint64
	}{
		{"store-2026-12-01.db", "golden-1", "r5", 11},
		// Written on a gateway that swept golden-1, a day old then.
		{"store-2026-12-03.db", "today-alice/bookkeeping-q4-1", "r13", 268},
	} {
		t.Run(tt.file, func(t *testing.T) { storeWrittenBefore(t, tt.file, tt.key, tt.replay, tt.last) })
	}
}

func storeWrittenBefore(t *testing.T, file, key, replay string, last uint64) {
	golden, err := os.ReadFile(filepath.Join("..", "..", "kv", "testdata", file))
	if err != nil {
		t.Fatal(err)
	}
	db := filepath.Join(t.TempDir(), "holon.db")
	if err := os.WriteFile(db, golden, 0o600); err != nil {
		t.Fatal(err)
	}
	if code, out, errs := run(t, "verify", "--db", db); code != 0 {
		t.Fatalf("holon verify on the store written before: exit %d\n%s%s", code, out, errs)
	}
	// The keys it recorded are days old: kept for the replay (a key kept
	// a day, the default, would have run again, as a new call).
	rs := startServe(t, map[string]string{"HOLON_REGISTRY": "agents,examples"}, "--addr", "127.0.0.1:0", "--db", db, "--idempotency-ttl", "87600h")
	api := "http://" + rs.addrs["api"]
	post := func(key string) (int, holon.Receipt, bool) {
		body := `{"mandate":"alice/bookkeeping-q4","agent":"holon-labs/text-tables","input":{"text":"a, 1\nb, 2"}}`
		req, _ := http.NewRequest(http.MethodPost, api+"/v0/calls", bytes.NewReader([]byte(body)))
		req.Header.Set("Content-Type", "application/json")
		if key != "" {
			req.Header.Set("Idempotency-Key", key)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out struct {
			Receipt  holon.Receipt
			Replayed bool
		}
		if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
			t.Fatal(err)
		}
		return resp.StatusCode, out.Receipt, out.Replayed
	}
	if code, r, replayed := post(key); code != http.StatusOK || !replayed || r.ID != replay {
		t.Errorf("Idempotency-Key %s again: %d %s replayed=%v, want 200 replaying %s", key, code, r.ID, replayed, replay)
	}
	code, r, _ := post("")
	if seq, _ := holon.ReceiptSeq(r.ID); code != http.StatusOK || !r.Billed || seq <= last {
		t.Errorf("a new call: %d %s billed=%v, want 200, billed, after r%d", code, r.ID, r.Billed, last)
	}
	rs.stop(t)
	if code, out, errs := run(t, "verify", "--db", db); code != 0 {
		t.Fatalf("holon verify after serving on it: exit %d\n%s%s", code, out, errs)
	}
}
