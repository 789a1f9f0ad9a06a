package appliance

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"holon.dev/holon"
	"holon.dev/holon/appliance/publishing"
	"holon.dev/holon/backup"
	"holon.dev/holon/backup/pgtest"
	"holon.dev/holon/kv/pg"
)

// Ensure that the registry's pass on a shared store reads the versions,
// yanks and verdicts again only when another gateway changed one of them
// (holon.RegistryRevision moved), and then applies the change: two passes
// with nothing changed read them once; a verdict written through another
// store handle is read by the next pass and applied.
func TestRegistrySync_ReadsOnlyWhatMoved(t *testing.T) {
	url := pgtest.Start(t).CreateDB(t, "regsync")
	open := func(_ string, opts holon.StoreOptions) (holon.Store, error) {
		return pg.OpenWith(context.Background(), url, opts, pg.Options{Lease: 2 * time.Second})
	}
	app, err := Open(context.Background(), Config{OpenStore: open, Backup: backup.StoreHandler,
		DB: filepath.Join(t.TempDir(), "holon.db"), Registry: []string{"agents"}, NoSync: true, Hosted: true})
	if err != nil {
		t.Fatal(err)
	}
	defer app.Close()
	// The shipped agents' evaluations, which start with the gateway,
	// write their verdicts (and move the revision) first.
	if err := app.WaitEvaluations(t.Context()); err != nil {
		t.Fatal(err)
	}
	s := publishing.NewSync(app.store, app.engine.Registry(), app.log)
	for range 3 {
		if err := s.Pass(); err != nil {
			t.Fatal(err)
		}
	}
	if s.Passes() != 1 {
		t.Errorf("%d whole passes with nothing changed, want 1", s.Passes())
	}
	latest := app.engine.Registry().Latest()
	if len(latest) == 0 {
		t.Fatal("no version listed")
	}
	v := latest[0]
	other, err := pg.Open(context.Background(), url, holon.StoreOptions{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	passed := !v.Facts.Evaluated
	err = other.Update(context.Background(), func(tx holon.Tx) error {
		return tx.Put(holon.BucketEvals, v.Manifest.Ref(), map[string]any{"passed": passed})
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Pass(); err != nil {
		t.Fatal(err)
	}
	got, _ := app.engine.Registry().Get(v.Manifest.Ref())
	if s.Passes() != 2 || got.Facts.Evaluated != passed {
		t.Errorf("after a verdict through another handle: %d whole passes, evaluated %v; want 2 and %v", s.Passes(), got.Facts.Evaluated, passed)
	}
}
