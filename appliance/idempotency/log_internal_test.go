package idempotency

import (
	"context"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"holon.dev/holon"
	"holon.dev/holon/kv"
)

// testClock is a clock that moves only when told to.
type testClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *testClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *testClock) advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// logStore is a store file under a test's directory, opened (and closed
// again) by open.
type logStore struct {
	t     *testing.T
	path  string
	clock *testClock
	store holon.Store
}

func newLogStore(t *testing.T) *logStore {
	s := &logStore{t: t, path: filepath.Join(t.TempDir(), "holon.db"),
		clock: &testClock{now: time.Date(2026, 12, 1, 8, 0, 0, 0, time.UTC)}}
	t.Cleanup(func() {
		if s.store != nil {
			_ = s.store.Close()
		}
	})
	return s
}

// open (re)opens the store, as a start of the gateway does, and returns
// its keys, opened.
func (s *logStore) open() *Keys {
	s.t.Helper()
	if s.store != nil {
		if err := s.store.Close(); err != nil {
			s.t.Fatal(err)
		}
	}
	store, err := kv.OpenStore(s.path, holon.StoreOptions{NoSync: true})
	if err != nil {
		s.t.Fatal(err)
	}
	s.store = store
	d := New(store, s.clock.Now, DefaultTTL)
	if err := d.Open(context.Background()); err != nil {
		s.t.Fatal(err)
	}
	return d
}

// finish runs a call of key to its end: checked and recorded with a
// settled receipt in one transaction, as a settlement records it.
func finish(t *testing.T, d *Keys, key, receipt string) {
	t.Helper()
	c := claim(t, d, key)
	err := d.store.Update(context.Background(), func(tx holon.Tx) error {
		if err := c.Check(tx); err != nil {
			return err
		}
		return c.Record(tx, &holon.Receipt{ID: receipt, Status: holon.StatusSucceeded, Created: d.now()})
	})
	if err != nil {
		t.Fatalf("finish %s: %v", key, err)
	}
}

func claim(t *testing.T, d *Keys, key string) *Claim {
	t.Helper()
	c, err := d.Claim("scope", key, map[string]string{"call": "one"})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// check is what a new request with key meets: the receipt it replays, or
// "" when it runs, or the error code that refuses it.
func check(t *testing.T, d *Keys, key string) string {
	t.Helper()
	c := claim(t, d, key)
	var err error
	_ = d.store.View(func(tx holon.Tx) error { err = c.Check(tx); return nil })
	var replay *ReplayError
	switch {
	case err == nil:
		return ""
	case errors.As(err, &replay):
		return replay.Rec.Receipt
	default:
		return holon.ErrorCode(err)
	}
}

// idemKeys lists the keys of the idempotency bucket under prefix.
func idemKeys(t *testing.T, store holon.Store, prefix string) []string {
	t.Helper()
	var keys []string
	err := store.View(func(tx holon.Tx) error {
		return tx.ForEach(holon.BucketIdempotency, prefix, func(k string, _ json.RawMessage) (bool, error) {
			keys = append(keys, k)
			return true, nil
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	return keys
}

// Ensure that on a store only this process writes a finished key is
// appended to the log, not written under key/, and that a restart reads
// the log back into the index.
func TestLog_RestartRebuildsIndex(t *testing.T) {
	s := newLogStore(t)
	d := s.open()
	finish(t, d, "k1", "r1")
	finish(t, d, "k2", "r2")
	if log, layout := idemKeys(t, s.store, logPrefix), idemKeys(t, s.store, "key/"); len(log) != 2 || len(layout) != 0 {
		t.Fatalf("log %v, key/ %v: want the two keys in the log only", log, layout)
	}
	d = s.open()
	for k, seq := range map[string]uint64{"scope/k1": 1, "scope/k2": 2} {
		if got, ok := d.logged(k); !ok || got != seq {
			t.Errorf("index of %s after a restart: %d, %v, want %d", k, got, ok, seq)
		}
	}
	finish(t, d, "k3", "r3")
	if got, _ := d.logged("scope/k3"); got != 3 {
		t.Errorf("the next key after a restart went to entry %d, want 3", got)
	}
}

// Ensure that a key finished before a restart replays the same receipt
// after it, and is still refused with another request.
func TestLog_ReplayAfterRestart(t *testing.T) {
	s := newLogStore(t)
	finish(t, s.open(), "k1", "r1")
	d := s.open()
	if got := check(t, d, "k1"); got != "r1" {
		t.Errorf("k1 after a restart: %q, want the replay of r1", got)
	}
	other, err := d.Claim("scope", "k1", map[string]string{"call": "another"})
	if err != nil {
		t.Fatal(err)
	}
	_ = d.store.View(func(tx holon.Tx) error { err = other.Check(tx); return nil })
	if holon.ErrorCode(err) != CodeIdempotencyMismatch {
		t.Errorf("k1 with another request after a restart: %v, want %s", err, CodeIdempotencyMismatch)
	}
	s.clock.advance(DefaultTTL)
	if got := check(t, d, "k1"); got != "" {
		t.Errorf("k1 after its lifetime: %q, want a new run", got)
	}
}

// Ensure that the sweep folds the log into key/ (deleting the expired
// keys without writing them), and that a folded key still replays: while
// the index still names its deleted log entry, once the index forgot it,
// and after a restart.
func TestLog_FoldKeepsReplay(t *testing.T) {
	s := newLogStore(t)
	d := s.open()
	finish(t, d, "old", "r1")
	s.clock.advance(DefaultTTL - time.Hour)
	finish(t, d, "k1", "r2")
	s.clock.advance(2 * time.Hour)
	n, err := d.Sweep(context.Background())
	if err != nil || n != 1 {
		t.Fatalf("sweep: %d, %v, want the expired key deleted", n, err)
	}
	if log, layout := idemKeys(t, s.store, logPrefix), idemKeys(t, s.store, "key/"); len(log) != 0 || len(layout) != 1 || layout[0] != "key/scope/k1" {
		t.Fatalf("after the fold: log %v, key/ %v, want the live key under key/ only", log, layout)
	}
	if got := check(t, d, "k1"); got != "r2" {
		t.Errorf("k1 folded: %q, want the replay of r2", got)
	}
	s.clock.advance(foldGrace)
	if _, err := d.Sweep(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, ok := d.logged("scope/k1"); ok {
		t.Errorf("k1 still in the index a grace after its fold")
	}
	if got := check(t, d, "k1"); got != "r2" {
		t.Errorf("k1 out of the index: %q, want the replay of r2", got)
	}
	if got := check(t, s.open(), "k1"); got != "r2" {
		t.Errorf("k1 folded, after a restart: %q, want the replay of r2", got)
	}
}

// Ensure that a key both in the log and under key/ answers with its later
// record: a record of an earlier (expired) run under key/ gives way to
// the log's, an interrupted later run under key/ wins over an expired log
// entry, and a fold never writes an entry over a later record.
func TestLog_KeyInLogAndLayout(t *testing.T) {
	s := newLogStore(t)
	d := s.open()
	put := func(key string, rec Record) {
		t.Helper()
		err := s.store.Update(context.Background(), func(tx holon.Tx) error {
			return tx.Put(holon.BucketIdempotency, "key/scope/"+key, rec)
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	hash := claim(t, d, "k").hash
	past := s.clock.Now().Add(-DefaultTTL - time.Hour)
	put("k1", Record{State: stateDone, Request: hash, Receipt: "r0", Status: 200, Started: past, Finished: &past})
	finish(t, d, "k1", "r1")
	if got := check(t, d, "k1"); got != "r1" {
		t.Errorf("k1, expired under key/ and live in the log: %q, want the replay of r1", got)
	}

	finish(t, d, "k2", "r2")
	s.clock.advance(DefaultTTL + time.Hour)
	later := s.clock.Now()
	put("k2", Record{State: stateInterrupted, Request: hash, Receipt: "r3", Started: later, Finished: &later})
	if got := check(t, d, "k2"); got != CodeIdempotencyInterrupted {
		t.Errorf("k2, expired in the log and interrupted under key/: %q, want %s", got, CodeIdempotencyInterrupted)
	}

	finish(t, d, "k3", "r4")
	earlier := s.clock.Now().Add(-time.Minute)
	put("k3", Record{State: stateDone, Request: hash, Receipt: "r5", Status: 200, Started: earlier, Finished: &earlier})
	finish(t, d, "k4", "r7")
	put("k4", Record{State: stateInterrupted, Request: hash, Receipt: "r8", Started: later.Add(time.Hour), Finished: new(later.Add(time.Hour))})
	if _, err := d.Sweep(context.Background()); err != nil {
		t.Fatal(err)
	}
	for key, want := range map[string]string{"k3": "r4", "k4": "r8"} {
		var rec Record
		err := s.store.View(func(tx holon.Tx) error { return tx.Get(holon.BucketIdempotency, "key/scope/"+key, &rec) })
		if err != nil || rec.Receipt != want {
			t.Errorf("key/scope/%s after the fold: %+v, %v, want the record of %s", key, rec, err, want)
		}
	}
}

// sharedStore hides the store's Writers (holon.SoleWriter): a store several gateways
// share.
type sharedStore struct{ holon.Store }

// Ensure that on a store several gateways share, Open folds the log a sole
// writer left, and finished keys go to key/.
func TestLog_SharedStoreFoldsAtOpen(t *testing.T) {
	s := newLogStore(t)
	d := s.open()
	for _, k := range []string{"k1", "k2"} {
		finish(t, d, k, "r-"+k)
	}
	s.open()
	shared := New(sharedStore{s.store}, s.clock.Now, DefaultTTL)
	if err := shared.Open(context.Background()); err != nil {
		t.Fatal(err)
	}
	finish(t, shared, "k3", "r-k3")
	if log, layout := idemKeys(t, s.store, logPrefix), idemKeys(t, s.store, "key/"); len(log) != 0 || len(layout) != 3 {
		t.Errorf("log %v, key/ %v: want no log, the three keys under key/", log, layout)
	}
	for _, k := range []string{"k1", "k2", "k3"} {
		if got := check(t, shared, k); got != "r-"+k {
			t.Errorf("%s on the shared store: %q, want the replay of r-%s", k, got, k)
		}
	}
}

// Ensure that a read begun before a fold, which still shows the key in the
// log and not yet under key/, finds it there while it reads, however many
// sweeps run meanwhile: the index forgets a folded key only foldGrace
// after its fold.
func TestLog_FoldDuringRead(t *testing.T) {
	s := newLogStore(t)
	d := s.open()
	finish(t, d, "k1", "r1")
	// Room in the file, so that the fold's commit needs no larger map of
	// it (which would wait for the read).
	err := s.store.Update(context.Background(), func(tx holon.Tx) error {
		for i := range 2000 {
			if err := tx.Put(holon.BucketSettings, logKey(uint64(i)), string(make([]byte, 1000))); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	c := claim(t, d, "k1")
	inRead, folded, checked := make(chan struct{}), make(chan struct{}), make(chan error, 1)
	go func() {
		checked <- s.store.View(func(tx holon.Tx) error {
			close(inRead)
			<-folded
			return c.Check(tx)
		})
	}()
	<-inRead
	swept := make(chan error, 1)
	go func() {
		_, err := d.Sweep(context.Background())
		if err == nil {
			_, err = d.Sweep(context.Background())
		}
		swept <- err
	}()
	select {
	case err := <-swept:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		close(folded)
		t.Fatal("the sweeps waited for the read")
	}
	if layout := idemKeys(t, s.store, "key/"); len(layout) != 1 {
		t.Fatalf("key/ %v after the sweeps, want k1 folded", layout)
	}
	close(folded)
	var replay *ReplayError
	if err := <-checked; !errors.As(err, &replay) || replay.Rec.Receipt != "r1" {
		t.Errorf("k1 read from before the fold: %v, want the replay of r1", err)
	}
}

// TestLogEntry_AppendJSONSameAsEncodingJSON holds the log entry's own
// encoder to json.Marshal's bytes and errors, on random entries: strings
// that need escaping, each optional field present and absent, times with
// zones and nanoseconds, and times json.Marshal refuses.
func TestLogEntry_AppendJSONSameAsEncodingJSON(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	strs := []string{"", "k-1", "acct/x", `a"b\c`, "<tag>&amp;", "\x00\x1f\x7f", "\xff\xfe", "line\u2028sep\u2029", "é✓"}
	str := func() string { return strs[rng.IntN(len(strs))] + strs[rng.IntN(len(strs))] }
	zones := []*time.Location{time.UTC, time.FixedZone("", 5*3600+30*60), time.FixedZone("", -8*3600), time.FixedZone("", 25*3600)}
	tm := func() time.Time {
		year := 1970 + rng.IntN(80)
		if rng.IntN(30) == 0 {
			year = 10000 + rng.IntN(5)
		}
		return time.Date(year, time.Month(1+rng.IntN(12)), 1+rng.IntN(28), rng.IntN(24), rng.IntN(60), rng.IntN(60), rng.IntN(3)*rng.IntN(1e9), zones[rng.IntN(len(zones))])
	}
	failed := 0
	for range 20000 {
		e := logEntry{Key: str(), Record: Record{State: str(), Request: str(), Started: tm()}}
		if rng.IntN(2) == 0 {
			e.Receipt = str()
		}
		if rng.IntN(2) == 0 {
			e.Status = []int{200, 402, 500, -1}[rng.IntN(4)]
		}
		if rng.IntN(2) == 0 {
			f := tm()
			e.Finished = &f
		}
		want, wantErr := json.Marshal(e)
		got, gotErr := e.AppendJSON([]byte("prefix"))
		if (wantErr == nil) != (gotErr == nil) {
			t.Fatalf("%+v: error %v, json.Marshal's %v", e, gotErr, wantErr)
		}
		if wantErr != nil {
			failed++
			continue
		}
		if string(got) != "prefix"+string(want) {
			t.Fatalf("%+v:\n got %s\nwant prefix%s", e, got, want)
		}
	}
	if failed == 0 {
		t.Fatal("no entry that json.Marshal refuses was tried")
	}
}
