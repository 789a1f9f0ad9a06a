package accounts

import (
	"context"
	"crypto/rand"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"holon.dev/holon"
	"holon.dev/holon/appliance/token"
	"holon.dev/holon/kv"
)

// viewCounter is a store that counts its read transactions.
type viewCounter struct {
	holon.Store
	views int
}

func (v *viewCounter) View(fn func(holon.Tx) error) error {
	v.views++
	return v.Store.View(fn)
}

func (v *viewCounter) BucketChanges(bucket string) uint64 {
	return v.Store.(holon.Changes).BucketChanges(bucket)
}

// Ensure that the key check, which keeps what it read of a key's and an
// account's records, sees every change to them at once: a key checked,
// then revoked, is refused; an account checked, then disabled (its key
// untouched), is refused; enabled again, it passes; a key deleted is
// unknown; and a key kept expires on time. A check after the first, with
// nothing changed, reads nothing.
func TestKeyPrincipal_SeesChangesAtOnce(t *testing.T) {
	kvs, err := kv.OpenStore(filepath.Join(t.TempDir(), "holon.db"), holon.StoreOptions{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer kvs.Close()
	s := &viewCounter{Store: kvs}
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	r := New(Config{Store: s, Now: func() time.Time { return now }, Rand: rand.Reader})
	update := func(fn func(tx holon.Tx) error) {
		t.Helper()
		if err := s.Update(context.Background(), fn); err != nil {
			t.Fatal(err)
		}
	}
	acct := &Account{Handle: "ann", Email: "ann@example.com", Created: now, Mandates: []string{"ann/sandbox"}}
	secret, key, err := r.DrawKey(token.KindAgent, "ann", "ann/sandbox", false)
	if err != nil {
		t.Fatal(err)
	}
	update(func(tx holon.Tx) error {
		if err := Put(tx, acct); err != nil {
			return err
		}
		return PutKey(tx, key)
	})
	check := func(when, want string) {
		t.Helper()
		for i := range 2 { // the second check finds the records kept
			views := s.views
			_, ok, err := r.VerifyKey(nil, secret)
			if i == 1 && want == "" && s.views != views {
				t.Errorf("%s: a check of a key kept, nothing changed since, read the store", when)
			}
			switch {
			case !ok:
				t.Fatalf("%s: VerifyKey did not take an agent key", when)
			case want == "" && err != nil:
				t.Errorf("%s: %v, want the key to pass", when, err)
			case want != "" && (err == nil || !strings.Contains(err.Error(), want)):
				t.Errorf("%s: %v, want %q", when, err, want)
			}
		}
	}
	check("new", "")
	acct.Disabled = &Disabled{At: now, Reason: "spam"}
	update(func(tx holon.Tx) error { return Put(tx, acct) })
	check("account disabled", "belongs to a disabled account")
	acct.Disabled = nil
	update(func(tx holon.Tx) error { return Put(tx, acct) })
	check("account enabled again", "")
	revoked := *key
	revoked.Revoked = &now
	update(func(tx holon.Tx) error { return UpdateKey(tx, &revoked) })
	check("key revoked", "was revoked")
	update(func(tx holon.Tx) error { return UpdateKey(tx, key) })
	check("key restored", "")
	expiring := *key
	expires := now.Add(time.Minute)
	expiring.Expires = &expires
	update(func(tx holon.Tx) error { return UpdateKey(tx, &expiring) })
	check("key expiring in a minute", "")
	now = now.Add(2 * time.Minute)
	check("key expired", "expired at")
	update(func(tx holon.Tx) error { return tx.Delete(holon.BucketKeys, keyByHash(key.Hash)) })
	check("key deleted", "never issued")
	if _, err := r.KeyPrincipal(key.Hash, token.KindAgent, key.Prefix); !errors.As(err, new(*holon.Error)) {
		t.Errorf("a deleted key: %v, want a coded error", err)
	}
}
