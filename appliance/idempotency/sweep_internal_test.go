package idempotency

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"holon.dev/holon"
	"holon.dev/holon/kv"
)

// Ensure that each write transaction of the sweep deletes at most
// sweepChunk records (500): 10,000 expired records, scattered among
// fresh and running ones, take at least 20, each within the bound, and
// the sweep makes no commit besides them.
func TestIdempotencySweep_BoundedTransactions(t *testing.T) {
	store, err := kv.OpenStore(filepath.Join(t.TempDir(), "holon.db"), holon.StoreOptions{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	start := time.Date(2026, 12, 1, 8, 0, 0, 0, time.UTC)
	err = store.Update(context.Background(), func(tx holon.Tx) error {
		for i := range 12_000 {
			at := start
			if i%6 == 5 {
				at = start.Add(23 * time.Hour) // fresh at the sweep
			}
			rec := Record{State: stateDone, Request: "r", Receipt: fmt.Sprintf("r%d", i), Status: 200, Started: at, Finished: &at}
			if err := tx.Put(holon.BucketIdempotency, recordKey("s", fmt.Sprintf("%06d", i)), rec); err != nil {
				return err
			}
			if i%100 == 0 {
				run := Record{State: stateRunning, Request: "r", Receipt: fmt.Sprintf("q%d", i), Started: start}
				if err := tx.Put(holon.BucketIdempotency, runKey("s", fmt.Sprintf("q%06d", i)), run); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	var chunks []int
	d := &Keys{store: store, ttl: DefaultTTL,
		now:     func() time.Time { return start.Add(25 * time.Hour) },
		onSweep: func(n int) { chunks = append(chunks, n) }}
	before := store.Stats().Commits
	n, err := d.Sweep(context.Background())
	if err != nil || n != 10_000 {
		t.Fatalf("sweep: %d, %v, want 10000", n, err)
	}
	sum := 0
	for i, c := range chunks {
		if c > sweepChunk {
			t.Errorf("transaction %d deleted %d records, more than %d", i, c, sweepChunk)
		}
		sum += c
	}
	commits := store.Stats().Commits - before
	if len(chunks) < 20 || sum != n || commits != uint64(len(chunks)) {
		t.Errorf("%d transactions deleting %d records, %d commits: want at least 20, deleting %d, one commit each", len(chunks), sum, commits, n)
	}
	left := map[string]int{}
	_ = store.View(func(tx holon.Tx) error {
		for _, p := range []string{"key/", "run/"} {
			_ = tx.ForEach(holon.BucketIdempotency, p, func(string, json.RawMessage) (bool, error) { left[p]++; return true, nil })
		}
		return nil
	})
	if left["key/"] != 2_000 || left["run/"] != 120 {
		t.Errorf("left %v, want 2000 fresh key/ and 120 running run/ records", left)
	}
}
