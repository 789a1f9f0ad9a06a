package appliance

import (
	"context"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"holon.dev/holon"
	"holon.dev/holon/appliance/accounts"
	"holon.dev/holon/appliance/token"
	"holon.dev/holon/backup"
	"holon.dev/holon/kv"
)

// Ensure that a human key with an expiry (the 30-day keys of GitHub
// sign-in) authenticates until then and is refused after, with a message
// that says to sign in again.
func TestAuthenticate_ExpiringKey(t *testing.T) {
	var clock atomic.Pointer[time.Time]
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	clock.Store(&now)
	app, err := Open(context.Background(), Config{OpenStore: kv.OpenStore, Backup: backup.StoreHandler,
		DB: filepath.Join(t.TempDir(), "holon.db"), Registry: []string{"agents"}, NoSync: true, Hosted: true,
		Now: func() time.Time { return *clock.Load() },
	})
	if err != nil {
		t.Fatal(err)
	}
	defer app.Close()
	key, rec, err := app.accounts.DrawKey(token.KindHuman, "gh-user", "", false)
	if err != nil {
		t.Fatal(err)
	}
	exp := now.Add(30 * 24 * time.Hour)
	rec.Expires = &exp
	err = app.store.Update(context.Background(), func(tx holon.Tx) error {
		if err := accounts.Put(tx, &accounts.Account{Handle: "gh-user", Email: "gh@example.com", Created: now}); err != nil {
			return err
		}
		return accounts.PutKey(tx, rec)
	})
	if err != nil {
		t.Fatal(err)
	}
	req := httptest.NewRequest("GET", "/v0/me", nil)
	req.Header.Set("Authorization", "Bearer "+key)
	if p, err := app.chain.Authenticate(req); err != nil || p.Kind != token.KindHuman || p.Account != "gh-user" {
		t.Fatalf("before its expiry: %+v, %v", p, err)
	}
	clock.Store(&exp)
	if _, err := app.chain.Authenticate(req); err == nil || !strings.Contains(err.Error(), "expired") || !strings.Contains(err.Error(), "sign in again") {
		t.Errorf("at its expiry: %v, want an invalid_key saying it expired", err)
	}
}
