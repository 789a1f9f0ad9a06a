package files

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"log/slog"
	"sync"
	"testing"
	"time"

	"holon.dev/holon"
	"holon.dev/holon/backup/pgtest"
	"holon.dev/holon/gateway"
	"holon.dev/holon/kv/pg"
)

// clock is a settable clock.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }

func (c *clock) add(d time.Duration) { c.mu.Lock(); c.now = c.now.Add(d); c.mu.Unlock() }

// openShared opens a file store on the PostgreSQL database at url.
func openShared(t *testing.T, url string, c *clock) (*Store, *pg.Store) {
	t.Helper()
	st, err := pg.Open(context.Background(), url, holon.StoreOptions{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	fs, err := Open(st, Options{Dir: t.TempDir(), Now: c.Now, Rand: rand.Reader, Log: slog.New(slog.DiscardHandler), NoSync: true, LinkKey: make([]byte, 32)})
	if err != nil {
		t.Fatal(err)
	}
	return fs, st
}

// blobCount is how many blobs the store keeps.
func blobCount(t *testing.T, st *pg.Store) int {
	t.Helper()
	n := 0
	if err := st.View(func(tx holon.Tx) error {
		return tx.(holon.BlobTx).ForEachBlob("", func(string) (bool, error) { n++; return true, nil })
	}); err != nil {
		t.Fatal(err)
	}
	return n
}

// Ensure that an upload whose bytes another gateway's sweep deletes
// between their storing and its record's commit (the last file naming the
// same bytes expired) stores them again: the record it commits names
// bytes that are there, and they read back.
func TestShared_BlobSweptBeforeTheRecordCommits(t *testing.T) {
	url := pgtest.Start(t).CreateDB(t, "files")
	c := &clock{now: time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)}
	a, st := openShared(t, url, c)
	b, _ := openShared(t, url, c)
	doc := []byte("the same bytes, uploaded twice a day apart")
	ctx := context.Background()
	if _, err := a.Put(ctx, "ann", "text/plain", -1, bytes.NewReader(doc)); err != nil {
		t.Fatal(err)
	}
	c.add(25 * time.Hour) // the first file expired
	swept := 0
	a.beforeCommit = func() {
		if swept == 0 {
			n, err := b.Sweep(ctx)
			if err != nil {
				t.Error(err)
			}
			swept = n
		}
	}
	rec, err := a.Put(ctx, "ann", "text/plain", -1, bytes.NewReader(doc))
	if err != nil {
		t.Fatal(err)
	}
	if swept != 1 {
		t.Fatalf("the sweep between the second upload's bytes and its record deleted %d files, want 1", swept)
	}
	if n := blobCount(t, st); n != 1 {
		t.Fatalf("%d blobs after the upload committed, want its bytes", n)
	}
	links, err := b.Links(ctx, "ann", []string{rec.Handle()}, false)
	if err != nil {
		t.Fatal(err)
	}
	got, err := gatewayRead(links[rec.Handle()])
	if err != nil || !bytes.Equal(got, doc) {
		t.Errorf("the second upload read on the other gateway: %q %v", got, err)
	}
}

// Ensure that bytes no record names (a gateway stopped between storing
// them and committing their record) are deleted by the stray pass, and
// that bytes a record names are kept.
func TestShared_RemoveStrays(t *testing.T) {
	url := pgtest.Start(t).CreateDB(t, "files")
	c := &clock{now: time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)}
	a, st := openShared(t, url, c)
	ctx := context.Background()
	if _, err := a.Put(ctx, "ann", "text/plain", -1, bytes.NewReader([]byte("kept"))); err != nil {
		t.Fatal(err)
	}
	stray := []byte("bytes whose record never committed")
	if err := st.PutBlob(ctx, hexSHA(stray), int64(len(stray)), bytes.NewReader(stray)); err != nil {
		t.Fatal(err)
	}
	if n := blobCount(t, st); n != 2 {
		t.Fatalf("%d blobs, want 2", n)
	}
	if err := a.RemoveStrays(ctx); err != nil {
		t.Fatal(err)
	}
	if n := blobCount(t, st); n != 1 {
		t.Errorf("after the stray pass: %d blobs, want the one a record names", n)
	}
}

func gatewayRead(l gateway.FileLink) ([]byte, error) {
	return gateway.ReadFile(context.Background(), l)
}

func hexSHA(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}
