package pg_test

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"holon.dev/holon"
)

// Ensure that a row written whole is written as its update read it: a
// document, a mandate, a hold or an approval changed behind the writer's
// back (as another gateway's writer changes it, which this one learns only
// later) since the writer read it is not overwritten with what the update
// computed from the old value. The update runs again on the row as it is
// (a safe run, or a run of its own) and its write builds on that.
func TestGuards_RowsWrittenAsRead(t *testing.T) {
	s, conn := openWatched(t, "guards")
	ctx := context.Background()
	behind := func(sql string, args ...any) {
		t.Helper()
		if _, err := conn.Exec(ctx, sql, args...); err != nil {
			t.Fatal(err)
		}
	}
	type counted struct {
		N int `json:"n"`
	}
	doc := func(key string) (c counted, found bool) {
		t.Helper()
		var b []byte
		err := conn.QueryRow(ctx, `SELECT convert_to(doc::text, 'UTF8') FROM app_docs WHERE bucket = $1 AND key = $2`, holon.BucketSettings, key).Scan(&b)
		if errors.Is(err, pgx.ErrNoRows) {
			return c, false
		}
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(b, &c); err != nil {
			t.Fatal(err)
		}
		return c, true
	}
	read := func(key string) {
		t.Helper()
		if err := s.Update(ctx, func(tx holon.Tx) error {
			var c counted
			if err := tx.Get(holon.BucketSettings, key, &c); err != nil && !errors.Is(err, holon.ErrNotFound) {
				return err
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	safe := s.SafeRuns()

	t.Run("document", func(t *testing.T) {
		if err := s.Update(ctx, func(tx holon.Tx) error { return tx.Put(holon.BucketSettings, "n", counted{1}) }); err != nil {
			t.Fatal(err)
		}
		read("n") // the writer knows n = 1
		behind(`UPDATE app_docs SET doc = '{"n":5}' WHERE bucket = $1 AND key = 'n'`, holon.BucketSettings)
		if err := s.Update(ctx, func(tx holon.Tx) error {
			var c counted
			if err := tx.Get(holon.BucketSettings, "n", &c); err != nil {
				return err
			}
			c.N++
			return tx.Put(holon.BucketSettings, "n", c)
		}); err != nil {
			t.Fatal(err)
		}
		if c, _ := doc("n"); c.N != 6 {
			t.Errorf("n = %d, want 6: the update added 1 to what it knew (1), not to what the row held (5)", c.N)
		}
	})

	t.Run("absent", func(t *testing.T) {
		read("k") // the writer knows k is absent
		behind(`INSERT INTO app_docs (bucket, key, key_bytes, doc) VALUES ($1, 'k', 'k', '{"n":7}')`, holon.BucketSettings)
		var found atomic.Bool
		if err := s.Update(ctx, func(tx holon.Tx) error {
			var c counted
			err := tx.Get(holon.BucketSettings, "k", &c)
			if errors.Is(err, holon.ErrNotFound) {
				found.Store(false)
				return tx.Put(holon.BucketSettings, "k", counted{1}) // claimed: it was free
			}
			found.Store(true)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		if c, _ := doc("k"); c.N != 7 || !found.Load() {
			t.Errorf("k = %d (found %v), want 7 found: a key claimed twice", c.N, found.Load())
		}
	})

	t.Run("deleted", func(t *testing.T) {
		if err := s.Update(ctx, func(tx holon.Tx) error { return tx.Put(holon.BucketSettings, "d", counted{1}) }); err != nil {
			t.Fatal(err)
		}
		read("d")
		behind(`UPDATE app_docs SET doc = '{"n":2}' WHERE bucket = $1 AND key = 'd'`, holon.BucketSettings)
		// Deleted only while it still says 1.
		if err := s.Update(ctx, func(tx holon.Tx) error {
			var c counted
			if err := tx.Get(holon.BucketSettings, "d", &c); err != nil {
				return err
			}
			if c.N == 1 {
				return tx.Delete(holon.BucketSettings, "d")
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if c, found := doc("d"); !found || c.N != 2 {
			t.Errorf("d = %d (there: %v), want 2: deleted on what the writer knew", c.N, found)
		}
	})

	t.Run("a table of its own", func(t *testing.T) {
		// Sign-in records live in a table of their own (docs.go), as
		// credentials do.
		const key = "github/123"
		if err := s.Update(ctx, func(tx holon.Tx) error { return tx.Put(holon.BucketSignIn, key, "alice") }); err != nil {
			t.Fatal(err)
		}
		if err := s.Update(ctx, func(tx holon.Tx) error { var h string; return tx.Get(holon.BucketSignIn, key, &h) }); err != nil {
			t.Fatal(err)
		}
		behind(`UPDATE signin SET doc = '"bob"' WHERE key = $1`, key)
		// Renamed only while it still says alice.
		if err := s.Update(ctx, func(tx holon.Tx) error {
			var h string
			if err := tx.Get(holon.BucketSignIn, key, &h); err != nil {
				return err
			}
			if h != "alice" {
				return nil
			}
			return tx.Put(holon.BucketSignIn, key, "carol")
		}); err != nil {
			t.Fatal(err)
		}
		var got string
		if err := conn.QueryRow(ctx, `SELECT doc #>> '{}' FROM signin WHERE key = $1`, key).Scan(&got); err != nil {
			t.Fatal(err)
		}
		if got != "bob" {
			t.Errorf("sign-in %s = %s, want bob: renamed on what the writer knew", key, got)
		}
	})

	t.Run("two rows", func(t *testing.T) {
		// Two rows changed behind the writer: the group's fast run is
		// refused by the first, its safe run (which reads that one
		// again) by the second, and the update then runs on its own.
		for _, k := range []string{"p", "q"} {
			if err := s.Update(ctx, func(tx holon.Tx) error { return tx.Put(holon.BucketSettings, k, counted{1}) }); err != nil {
				t.Fatal(err)
			}
		}
		read("p")
		read("q")
		behind(`UPDATE app_docs SET doc = '{"n":5}' WHERE bucket = $1 AND key IN ('p', 'q')`, holon.BucketSettings)
		runs := s.AsReadRuns()
		if err := s.Update(ctx, func(tx holon.Tx) error {
			for _, k := range []string{"p", "q"} {
				var c counted
				if err := tx.Get(holon.BucketSettings, k, &c); err != nil {
					return err
				}
				c.N++
				if err := tx.Put(holon.BucketSettings, k, c); err != nil {
					return err
				}
			}
			return nil
		}); err != nil {
			t.Fatalf("an update whose two rows changed behind the writer: %v, want it run again until it stands", err)
		}
		for _, k := range []string{"p", "q"} {
			if c, _ := doc(k); c.N != 6 {
				t.Errorf("%s = %d, want 6", k, c.N)
			}
		}
		if s.AsReadRuns() == runs {
			t.Error("the update did not run again on its own: the test shows nothing of it")
		}
	})

	t.Run("mandate", func(t *testing.T) {
		put := func(tx holon.Tx, n int) error {
			return tx.PutMandate("m1", holon.Doc{Doc: json.RawMessage(`{"n":` + strconv.Itoa(n) + `}`), Created: time.Unix(1700000000, 0).UTC()})
		}
		if err := s.Update(ctx, func(tx holon.Tx) error { return put(tx, 1) }); err != nil {
			t.Fatal(err)
		}
		if err := s.Update(ctx, func(tx holon.Tx) error { _, err := tx.Mandate("m1"); return err }); err != nil {
			t.Fatal(err)
		}
		behind(`UPDATE mandates SET doc = '{"n":5}' WHERE id = 'm1'`)
		if err := s.Update(ctx, func(tx holon.Tx) error {
			d, err := tx.Mandate("m1")
			if err != nil {
				return err
			}
			var c counted
			if err := json.Unmarshal(d.Doc, &c); err != nil {
				return err
			}
			return put(tx, c.N+1)
		}); err != nil {
			t.Fatal(err)
		}
		var got string
		if err := conn.QueryRow(ctx, `SELECT doc::text FROM mandates WHERE id = 'm1'`).Scan(&got); err != nil {
			t.Fatal(err)
		}
		if got != `{"n":6}` {
			t.Errorf("mandate m1 = %s, want {\"n\":6}", got)
		}
	})

	t.Run("hold", func(t *testing.T) {
		h := &holon.Hold{Receipt: "r9", Payer: "bob", Mandate: "m1", Started: time.Now().UTC()}
		if err := s.Update(ctx, func(tx holon.Tx) error { return tx.PutHold(h) }); err != nil {
			t.Fatal(err)
		}
		if err := s.Update(ctx, func(tx holon.Tx) error { _, err := tx.Hold("r9"); return err }); err != nil {
			t.Fatal(err)
		}
		// Another gateway closed the call.
		behind(`DELETE FROM holds WHERE receipt = 'r9'`)
		err := s.Update(ctx, func(tx holon.Tx) error {
			h, err := tx.Hold("r9")
			if err != nil {
				return err
			}
			h.Children = append(h.Children, "r10")
			return tx.PutHold(h)
		})
		if !errors.Is(err, holon.ErrNotFound) {
			t.Errorf("a child added to a hold closed meanwhile: %v, want ErrNotFound (read again)", err)
		}
		var n int
		if err := conn.QueryRow(ctx, `SELECT count(*) FROM holds WHERE receipt = 'r9'`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n != 0 {
			t.Errorf("the hold closed by another gateway was put back")
		}
	})

	t.Run("approval", func(t *testing.T) {
		a := &holon.Approval{ID: "a1", Mandate: "m1", Caller: "bob", Agent: "x", InputHash: "h", Currency: "USD", Receipt: "r1",
			Status: "pending", Created: time.Now().UTC(), Expires: time.Now().Add(time.Hour).UTC()}
		if err := s.Update(ctx, func(tx holon.Tx) error { return tx.PutApproval(a) }); err != nil {
			t.Fatal(err)
		}
		// A human approves it on another gateway while this one expires
		// it, between its read and its write.
		var once atomic.Bool
		if err := s.Update(ctx, func(tx holon.Tx) error {
			got, err := tx.Approval("a1")
			if err != nil {
				return err
			}
			if once.CompareAndSwap(false, true) {
				behind(`UPDATE approvals SET status = 'granted' WHERE id = 'a1'`)
			}
			if got.Status != "pending" {
				return nil
			}
			got.Status = "expired"
			return tx.PutApproval(got)
		}); err != nil {
			t.Fatal(err)
		}
		var status string
		if err := conn.QueryRow(ctx, `SELECT status FROM approvals WHERE id = 'a1'`).Scan(&status); err != nil {
			t.Fatal(err)
		}
		if status != "granted" {
			t.Errorf("approval a1 %s, want granted: decided twice", status)
		}
	})

	if s.SafeRuns() == safe {
		t.Errorf("no group ran again: the rows changed behind the writer were not seen")
	}
}
