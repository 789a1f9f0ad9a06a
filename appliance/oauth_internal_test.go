package appliance

import (
	"bytes"
	"context"
	"path/filepath"
	"testing"
	"time"

	"holon.dev/holon"
	"holon.dev/holon/backup"
	"holon.dev/holon/kv"
)

// Ensure that pruning deletes expired codes and tokens and keeps live
// ones, and keeps a used code as long as the tokens it gave may live.
func TestOAuth_Prune(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	app, err := Open(context.Background(), Config{OpenStore: kv.OpenStore, Backup: backup.StoreHandler,
		DB: filepath.Join(t.TempDir(), "holon.db"), Registry: []string{"agents"}, NoSync: true, Hosted: true,
		Now: func() time.Time { return now },
	})
	if err != nil {
		t.Fatal(err)
	}
	defer app.Close()
	h := app.api.hosted
	used := now.Add(-time.Hour)
	records := map[string]any{
		oauthSecretKey("code", "expired"):     oauthCode{Expires: now.Add(-time.Minute)},
		oauthSecretKey("code", "used"):        oauthCode{Expires: now.Add(-time.Minute), Used: &used},
		oauthSecretKey("code", "live"):        oauthCode{Expires: now.Add(time.Minute)},
		oauthSecretKey("access", "expired"):   oauthAccess{Expires: now},
		oauthSecretKey("access", "live"):      oauthAccess{Expires: now.Add(time.Minute)},
		oauthSecretKey("refresh", "expired"):  oauthRefresh{Expires: now.Add(-time.Second), Used: &used},
		oauthSecretKey("refresh", "live"):     oauthRefresh{Expires: now.Add(time.Hour)},
		oauthClientKey("hoc_kept_regardless"): oauthClient{ID: "hoc_kept_regardless"},
	}
	every := make([]byte, 256)
	for i := range every {
		every[i] = byte(i)
	}
	h.rand = bytes.NewReader(every)
	err = app.store.Update(context.Background(), func(tx holon.Tx) error {
		for k, v := range records {
			if err := tx.Put(holon.BucketOAuth, k, v); err != nil {
				return err
			}
		}
		for range every {
			if err := h.pruneOAuth(tx, now); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{
		oauthSecretKey("code", "used"): true, oauthSecretKey("code", "live"): true,
		oauthSecretKey("access", "live"): true, oauthSecretKey("refresh", "live"): true,
		oauthClientKey("hoc_kept_regardless"): true,
	}
	err = app.store.View(func(tx holon.Tx) error {
		for k := range records {
			var raw map[string]any
			err := tx.Get(holon.BucketOAuth, k, &raw)
			if kept := err == nil; kept != want[k] {
				t.Errorf("%s: kept %v, want %v (%v)", k, kept, want[k], err)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
