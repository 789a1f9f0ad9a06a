package appliance_test

import (
	"bytes"
	"context"
	"net/http"
	"testing"
	"time"

	"holon.dev/holon"
	"holon.dev/holon/appliance"
	"holon.dev/holon/backup"
	"holon.dev/holon/backup/pgtest"
	"holon.dev/holon/kv/pg"
)

// Ensure that a call whose reservation committed in PostgreSQL but whose
// commit's answer was lost (the connection dropped as it came back) is
// answered 503 store_unavailable, never runs, and that its hold, which
// belongs to a gateway whose lease lives, is closed by that gateway as soon
// as the store answers again, not at its next recovery pass (the lease
// here is 30 s: a pass every 15 s): failed store_unavailable, unbilled,
// its hold and reservation released, and its Idempotency-Key no longer
// running; and that holon verify passes on the store after it (the closed
// call never settled, so it is in no latency histogram).
func TestCalls_LostReservationCommitIsClosed(t *testing.T) {
	url := pgtest.Start(t).CreateDB(t, "lostcommit")
	a := newFilesApp(t, func(c *appliance.Config) {
		c.OpenStore = func(_ string, opts holon.StoreOptions) (holon.Store, error) {
			return pg.OpenWith(context.Background(), url, opts, pg.Options{Lease: 30 * time.Second})
		}
	})
	ann := a.signup("ann")
	mandate := filesMandate(ann)
	st := a.app.Engine().Store().(*pg.Store)
	input := map[string]any{"text": "a,1\n"}
	// A call settles first, so that the store counts latency from before
	// the lost one.
	if status, out := ann.human.callWith(mandate, "holon-labs/text-tables", input); status != http.StatusOK {
		t.Fatalf("the first call: %d %v", status, out["error"])
	}
	var spent holon.Budget
	if err := st.View(func(tx holon.Tx) (err error) { spent, err = tx.Budget(mandate); return err }); err != nil {
		t.Fatal(err)
	}
	st.LoseCommitAnswer()
	keyed := ann.human.with("Idempotency-Key", "lost-1")
	status, out := keyed.callWith(mandate, "holon-labs/text-tables", input)
	if e, _ := out["error"].(map[string]any); status != http.StatusServiceUnavailable || e["code"] != holon.CodeStoreUnavailable {
		t.Fatalf("the call whose reservation's answer was lost: %d %v, want 503 %s", status, out, holon.CodeStoreUnavailable)
	}
	var rid string
	err := st.View(func(tx holon.Tx) error {
		hs, err := tx.Holds()
		if len(hs) != 1 {
			t.Fatalf("holds after the lost answer: %d (%v), want the one that landed", len(hs), err)
		}
		rid = hs[0].Receipt
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		var holds int
		var r *holon.Receipt
		var acct holon.Account
		var b holon.Budget
		err := st.View(func(tx holon.Tx) error {
			hs, err := tx.Holds()
			if err != nil {
				return err
			}
			holds = len(hs)
			if r, err = tx.Receipt(rid); err != nil {
				return err
			}
			if acct, err = tx.Account(r.Payer); err != nil {
				return err
			}
			b, err = tx.Budget(r.Mandate)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		if holds == 0 {
			if r.Status != holon.StatusFailed || r.Error == nil || *r.Error != holon.CodeStoreUnavailable || r.Billed || acct.Held != 0 || b.Reserved != 0 || b.Spent != spent.Spent {
				t.Errorf("closed: %s %v billed %v, held %s, budget %+v; want failed %s, unbilled, nothing held or reserved, spent still %s",
					r.Status, r.Error, r.Billed, acct.Held, b, holon.CodeStoreUnavailable, spent.Spent)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the hold of %s is still there 5 s later (receipt %s): nothing closes it before the next recovery pass", rid, r.Status)
		}
		time.Sleep(100 * time.Millisecond)
	}
	// Its Idempotency-Key records that end: re-sent, it replays the closed
	// receipt (not 409 in flight, nor interrupted: the end is known).
	if status, out := keyed.callWith(mandate, "holon-labs/text-tables", input); out["replayed"] != true || receiptOf(out)["id"] != rid || receiptOf(out)["status"] != holon.StatusFailed {
		t.Errorf("the key of the closed call, re-sent: %d %v; want the replay of %s, failed", status, out, rid)
	}
	// The gateway serves on.
	if status, out := ann.human.callWith(mandate, "holon-labs/text-tables", map[string]any{"text": "a,1\n"}); status != http.StatusOK {
		t.Errorf("the next call: %d %v", status, out["error"])
	}
	var buf bytes.Buffer
	if _, err := backup.Write(&buf, backup.PostgresSource(st), backup.Options{}); err != nil {
		t.Fatal(err)
	}
	rep, _, err := backup.VerifyFile(&buf, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if !rep.OK() {
		var out bytes.Buffer
		rep.WriteTo(&out)
		t.Errorf("holon verify after the call closed:\n%s", out.String())
	}
}
