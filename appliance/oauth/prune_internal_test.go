package oauth

import (
	"bytes"
	"context"
	"path/filepath"
	"testing"
	"time"

	"holon.dev/holon"
	"holon.dev/holon/kv"
)

// Ensure that pruning deletes expired codes and tokens and keeps live
// ones, and keeps a used code as long as the tokens it gave may live.
func TestOAuth_Prune(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	store, err := kv.OpenStore(filepath.Join(t.TempDir(), "holon.db"), holon.StoreOptions{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	every := make([]byte, 256)
	for i := range every {
		every[i] = byte(i)
	}
	s := New(Config{Store: store, Now: func() time.Time { return now }, Rand: bytes.NewReader(every)})
	used := now.Add(-time.Hour)
	records := map[string]any{
		secretKey("code", "expired"):     code{Expires: now.Add(-time.Minute)},
		secretKey("code", "used"):        code{Expires: now.Add(-time.Minute), Used: &used},
		secretKey("code", "live"):        code{Expires: now.Add(time.Minute)},
		secretKey("access", "expired"):   access{Expires: now},
		secretKey("access", "live"):      access{Expires: now.Add(time.Minute)},
		secretKey("refresh", "expired"):  refresh{Expires: now.Add(-time.Second), Used: &used},
		secretKey("refresh", "live"):     refresh{Expires: now.Add(time.Hour)},
		clientKey("hoc_kept_regardless"): client{ID: "hoc_kept_regardless"},
	}
	err = store.Update(context.Background(), func(tx holon.Tx) error {
		for k, v := range records {
			if err := tx.Put(holon.BucketOAuth, k, v); err != nil {
				return err
			}
		}
		for range every {
			if err := s.prune(tx, now); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{
		secretKey("code", "used"): true, secretKey("code", "live"): true,
		secretKey("access", "live"): true, secretKey("refresh", "live"): true,
		clientKey("hoc_kept_regardless"): true,
	}
	err = store.View(func(tx holon.Tx) error {
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
