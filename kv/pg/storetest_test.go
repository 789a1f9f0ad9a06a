package pg_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"sync"
	"testing"

	"holon.dev/holon"
	"holon.dev/holon/backup/pgtest"
	"holon.dev/holon/gateway/storetest"
	"holon.dev/holon/kv/pg"
)

// databases maps the suite's store paths to databases of one server: a
// path opened again is the same database.
type databases struct {
	srv  *pgtest.Server
	mu   sync.Mutex
	urls map[string]string
}

func newDatabases(t *testing.T) *databases {
	return &databases{srv: pgtest.Start(t), urls: map[string]string{}}
}

func (d *databases) url(t *testing.T, path string) string {
	d.mu.Lock()
	defer d.mu.Unlock()
	if u, ok := d.urls[path]; ok {
		return u
	}
	sum := sha256.Sum256([]byte(path))
	u := d.srv.CreateDB(t, "s"+hex.EncodeToString(sum[:8]))
	d.urls[path] = u
	return u
}

func (d *databases) open(t *testing.T, path string) holon.Store {
	s, err := pg.Open(context.Background(), d.url(t, path), holon.StoreOptions{})
	if err != nil {
		t.Fatalf("open %s: %v", path, err)
	}
	return s
}

// Ensure that the PostgreSQL store passes the shared suite of every
// holon.Store, unchanged, against a real PostgreSQL.
func TestStore_Suite(t *testing.T) {
	storetest.Run(t, newDatabases(t).open)
}

// Ensure that three handles on one database (three gateways) writing at
// once keep the suite's rules: money never overspent at any instant, keys
// claimed once, ids handed out once, pages without gaps.
func TestStore_Shared(t *testing.T) {
	storetest.RunShared(t, newDatabases(t).open)
}
