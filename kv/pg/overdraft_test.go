package pg_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"holon.dev/holon"
	"holon.dev/holon/journal"
	"holon.dev/holon/kv/pg"
)

// Ensure that accounts are moved, not overwritten, and that the database
// refuses an overdraft the writer could not see: a balance moved behind
// the writer's back (as a gateway whose writer took no turn would move
// it) keeps that move when the writer moves the account too, and a debit
// the writer judged from what it knew, which the account no longer has,
// fails ErrOverdrawn with nothing of its update written.
func TestOverdraft_RefusedByTheDatabase(t *testing.T) {
	s, conn := openWatched(t, "overdraft")
	ctx := context.Background()
	post := func(key, from, to, amount string) error {
		return s.Update(ctx, func(tx holon.Tx) error {
			e, _ := journal.Transfer(key, from, to, journal.MustParseAmount(amount))
			return tx.PostEntry(e)
		})
	}
	behind := func(sql string) {
		t.Helper()
		if _, err := conn.Exec(ctx, sql); err != nil {
			t.Fatal(err)
		}
	}
	balance := func(name string) string {
		t.Helper()
		var b string
		if err := conn.QueryRow(ctx, `SELECT balance::text FROM accounts WHERE name = $1`, name).Scan(&b); err != nil {
			t.Fatal(err)
		}
		return b
	}
	if err := post("signup:bob", "external:demo-credit", "bob", "1.00"); err != nil {
		t.Fatal(err)
	}
	// The writer knows bob at 1.00; bob gets 2.00 more behind its back.
	behind(`UPDATE accounts SET balance = balance + 2 WHERE name = 'bob'`)
	if err := post("settle:r1", "bob", "acme", "0.30"); err != nil {
		t.Fatal(err)
	}
	if got := balance("bob"); got != "2.700000" {
		t.Errorf("bob = %s, want 2.70: the move kept what was moved behind the writer", got)
	}
	// bob loses 2.60 behind the writer's back, which knows 0.70: a debit
	// of 0.50 would leave -0.40.
	behind(`UPDATE accounts SET balance = balance - 2.6 WHERE name = 'bob'`)
	err := post("settle:r2", "bob", "acme", "0.50")
	if !errors.Is(err, holon.ErrOverdrawn) {
		t.Fatalf("a debit beyond what bob has: %v, want ErrOverdrawn", err)
	}
	if got, acme := balance("bob"), balance("acme"); got != "0.100000" || acme != "0.300000" {
		t.Errorf("bob = %s, acme = %s after the refused debit, want 0.10 and 0.30 (nothing written)", got, acme)
	}
	var n int
	conn.QueryRow(ctx, `SELECT count(*) FROM journal_entries WHERE key = 'settle:r2'`).Scan(&n)
	if n != 0 {
		t.Errorf("the refused debit's entry was written")
	}
	// The writer forgot what it knew of bob, which the refusal showed
	// stale: it reads bob again, and its own check refuses the next
	// debit beyond the 0.10 left, then takes one of all of it.
	err = post("settle:r3", "bob", "acme", "0.20")
	if !errors.Is(err, holon.ErrOverdrawn) || !strings.Contains(err.Error(), "available after this update") {
		t.Errorf("a debit beyond the 0.10 left, after the refusal: %v; want the writer's own ErrOverdrawn", err)
	}
	if err := post("settle:r4", "bob", "acme", "0.10"); err != nil {
		t.Errorf("a debit of all that is left: %v", err)
	}
	// A debit and the release of the hold that covered it, in one
	// transaction, passes through an overdraft and ends out of it.
	behind(`UPDATE accounts SET balance = balance + 0.10, held = held + 0.10 WHERE name = 'bob'`)
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	tx.Exec(ctx, `UPDATE accounts SET balance = balance - 0.05 WHERE name = 'bob'`)
	tx.Exec(ctx, `UPDATE accounts SET held = held - 0.10 WHERE name = 'bob'`)
	if err := tx.Commit(ctx); err != nil {
		t.Errorf("a debit covered by the hold released with it: %v", err)
	}
}

// Ensure that an update a writer ran while it waited for the writers'
// lock, from a balance another gateway lowered meanwhile, cannot
// overdraw it once it holds the lock: it fails ErrOverdrawn, nothing of
// it written, and the other gateway's debit stands.
func TestOverdraft_RunWhileWaitingOnALoweredBalance(t *testing.T) {
	turns(t)
	stores, _ := openOn(t, "overdraftwait", 2)
	a, b := stores[0], stores[1]
	pg.NoWaitRuns(a) // its held update holds the lock
	ctx := context.Background()
	post := func(key, from, to, amount string) func(holon.Tx) error {
		return func(tx holon.Tx) error {
			e, _ := journal.Transfer(key, from, to, journal.MustParseAmount(amount))
			return tx.PostEntry(e)
		}
	}
	if err := a.Update(ctx, post("signup:bob", "external:demo-credit", "bob", "1.00")); err != nil {
		t.Fatal(err)
	}
	// b knows bob at 0.90.
	if err := b.Update(ctx, post("settle:b1", "bob", "acme", "0.10")); err != nil {
		t.Fatal(err)
	}
	release, doneA := heldUpdate(a, post("settle:a1", "bob", "acme", "0.80"))
	errs, wait := submit(b, 1, func(tx holon.Tx, _ int) error { return post("settle:b2", "bob", "acme", "0.50")(tx) })
	releaseOnceTaken(t, a, b, release, doneA)
	wait()
	if !errors.Is(errs[0], holon.ErrOverdrawn) {
		t.Errorf("a debit of 0.50 from the 0.10 left: %v, want ErrOverdrawn", errs[0])
	}
	if groups, _, _, _ := b.WaitRuns(); groups == 0 {
		t.Error("the debit did not run while its writer waited: the test shows nothing")
	}
	err := b.View(func(tx holon.Tx) error {
		bob, _ := tx.Account("bob")
		acme, _ := tx.Account("acme")
		if bob.Balance != journal.MustParseAmount("0.10") || acme.Balance != journal.MustParseAmount("0.90") || tx.HasEntry("settle:b2") {
			t.Errorf("bob %s, acme %s, settle:b2 journaled %v; want 0.10, 0.90, no", bob.Balance, acme.Balance, tx.HasEntry("settle:b2"))
		}
		return tx.(*pg.Tx).VerifyJournal()
	})
	if err != nil {
		t.Fatal(err)
	}
}

// Ensure that the hot rows a writer moves (budgets, budget windows,
// counters, agents' records) keep what was moved behind its back, as a
// gateway whose writer took no turn would move them: each gets the
// writer's move added, not the writer's idea of its value written.
func TestMoves_KeepWhatOthersMoved(t *testing.T) {
	s, conn := openWatched(t, "moves")
	ctx := context.Background()
	move := func() {
		t.Helper()
		err := s.Update(ctx, func(tx holon.Tx) error {
			if err := tx.PutMandate("m", holon.Doc{Doc: []byte(`{}`), Created: tx.Now()}); err != nil {
				return err
			}
			if err := tx.AddBudget("m", 3, 5); err != nil {
				return err
			}
			if err := tx.AddWindowBudget("m", "day:2026-12-07", 3, 5); err != nil {
				return err
			}
			if _, err := tx.AddCounter("c", 2); err != nil {
				return err
			}
			return tx.PostEvent(holon.Event{Receipt: "r1", Agent: "acme/a@1.0.0", Status: holon.StatusSucceeded, DurationMS: 7, Billed: 11, Currency: "EUR", Time: tx.Now()}, true)
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	move()
	for _, sql := range []string{
		`UPDATE budgets SET spent = spent + 1, reserved = reserved + 1 WHERE mandate = 'm'`,
		`UPDATE budget_windows SET spent = spent + 1, reserved = reserved + 1 WHERE mandate = 'm'`,
		`UPDATE counters SET value = value + 100 WHERE name = 'c'`,
		`UPDATE agent_records SET runs = runs + 100, succeeded = succeeded + 100, billed = billed + 1, duration_ms = duration_ms + 100 WHERE agent = 'acme/a@1.0.0'`,
	} {
		if _, err := conn.Exec(ctx, sql); err != nil {
			t.Fatal(err)
		}
	}
	move()
	var got [4]string
	err := conn.QueryRow(ctx, `SELECT
		(SELECT spent::text || '/' || reserved::text FROM budgets WHERE mandate = 'm'),
		(SELECT spent::text || '/' || reserved::text FROM budget_windows WHERE mandate = 'm'),
		(SELECT value::text FROM counters WHERE name = 'c'),
		(SELECT runs || '/' || succeeded || '/' || billed::text || '/' || duration_ms FROM agent_records WHERE agent = 'acme/a@1.0.0')`).
		Scan(&got[0], &got[1], &got[2], &got[3])
	if err != nil {
		t.Fatal(err)
	}
	want := [4]string{"1.000006/1.000010", "1.000006/1.000010", "104", "102/102/1.000022/114"}
	if got != want {
		t.Errorf("budget, window, counter, record = %v, want %v: the writer's moves added to what was moved behind it", got, want)
	}
}

// Ensure that the database refuses a budget raised above the limit its
// update declared, judged on the row: a reservation the writer judged
// within the mandate's total, from a budget another gateway has raised
// behind its back, fails ErrOverBudget with nothing written; the same
// for a window's budget.
func TestOverBudget_RefusedByTheDatabase(t *testing.T) {
	s, conn := openWatched(t, "overbudget")
	ctx := context.Background()
	const win = "day:2026-12-07"
	reserve := func(amount journal.Amount) error {
		return s.Update(ctx, func(tx holon.Tx) error {
			if err := tx.PutMandate("m", holon.Doc{Doc: []byte(`{}`), Created: tx.Now()}); err != nil {
				return err
			}
			tx.LimitBudget("m", "", journal.MustParseAmount("1.00"))
			tx.LimitBudget("m", win, journal.MustParseAmount("1.00"))
			if err := tx.AddBudget("m", 0, amount); err != nil {
				return err
			}
			return tx.AddWindowBudget("m", win, 0, amount)
		})
	}
	if err := reserve(journal.MustParseAmount("0.40")); err != nil {
		t.Fatal(err)
	}
	for _, table := range []string{"budgets", "budget_windows"} {
		if _, err := conn.Exec(ctx, `UPDATE `+table+` SET reserved = reserved + 0.50 WHERE mandate = 'm'`); err != nil {
			t.Fatal(err)
		}
	}
	if err := reserve(journal.MustParseAmount("0.40")); !errors.Is(err, holon.ErrOverBudget) {
		t.Fatalf("a reservation to 1.30 of 1.00: %v, want ErrOverBudget", err)
	}
	var b, w string
	if err := conn.QueryRow(ctx, `SELECT (SELECT reserved::text FROM budgets WHERE mandate = 'm'), (SELECT reserved::text FROM budget_windows WHERE mandate = 'm')`).Scan(&b, &w); err != nil {
		t.Fatal(err)
	}
	if b != "0.900000" || w != "0.900000" {
		t.Errorf("reserved %s and %s in the window after the refusal, want 0.90 each (nothing written)", b, w)
	}
	// The writer forgot the budget the refusal showed stale: its own
	// check refuses the next reservation over the limit.
	err := reserve(journal.MustParseAmount("0.20"))
	if !errors.Is(err, holon.ErrOverBudget) || !strings.Contains(err.Error(), "after this update") {
		t.Errorf("a reservation to 1.10 of 1.00, after the refusal: %v; want the writer's own ErrOverBudget", err)
	}
	// Within the limit on the row, it stands.
	if err := reserve(journal.MustParseAmount("0.10")); err != nil {
		t.Errorf("a reservation to 1.00 of 1.00: %v", err)
	}
}

// Ensure that a raise is judged against the limit it declared, whatever
// the later moves of its group declared: in one group, a reservation
// the writer judged within the mandate's total (from a budget raised
// behind its back) is sent in one round trip, and another update, a
// settlement that declares no limit, moves the same budget in the next.
// The raise fails ErrOverBudget and the settlement stands alone. Before
// schema version 29 the check read the limit the row's last move left
// (none) and the group committed 1.30 of 1.00.
func TestOverBudget_RaiseJudgedOnItsOwnLimit(t *testing.T) {
	s, conn := openWatched(t, "overbudgetlater")
	ctx := context.Background()
	limit := journal.MustParseAmount("1.00")
	if err := s.Update(ctx, func(tx holon.Tx) error {
		if err := tx.PutMandate("m", holon.Doc{Doc: []byte(`{}`), Created: tx.Now()}); err != nil {
			return err
		}
		tx.LimitBudget("m", "", limit)
		return tx.AddBudget("m", 0, journal.MustParseAmount("0.40"))
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, `UPDATE budgets SET reserved = reserved + 0.50 WHERE mandate = 'm'`); err != nil {
		t.Fatal(err)
	}
	sent := false
	errs := grouped(t, s,
		func(tx holon.Tx) error {
			tx.LimitBudget("m", "", limit)
			return tx.AddBudget("m", 0, journal.MustParseAmount("0.40"))
		},
		func(tx holon.Tx) error {
			// A row the writer does not hold: read in a round trip of its
			// own, which carries the reservation's move before it.
			if _, err := tx.Receipt("r999"); !errors.Is(err, holon.ErrNotFound) {
				return fmt.Errorf("receipt r999: %v, want ErrNotFound", err)
			}
			sent = true
			tenth := journal.MustParseAmount("0.10")
			return tx.AddBudget("m", tenth, -tenth)
		})
	if !sent {
		t.Fatal("the settlement did not run")
	}
	if !errors.Is(errs[0], holon.ErrOverBudget) {
		t.Errorf("a reservation to 1.30 of 1.00, its group's next move declaring no limit: %v, want ErrOverBudget", errs[0])
	}
	if errs[1] != nil {
		t.Errorf("the settlement beside it: %v", errs[1])
	}
	var b string
	if err := conn.QueryRow(ctx, `SELECT spent::text || '/' || reserved::text FROM budgets WHERE mandate = 'm'`).Scan(&b); err != nil {
		t.Fatal(err)
	}
	if b != "0.100000/0.800000" {
		t.Errorf("budget spent/reserved %s, want 0.100000/0.800000: the settlement alone", b)
	}
}

// Ensure that a hold is released once: a hold deleted behind the
// writer's back (as another gateway closes a call whose gateway's lease
// ran out) refuses the update that releases it as the writer read it,
// with ErrChangedMeanwhile and nothing written (the amount it held is
// not released a second time, which would leave bob holding less than
// his one call still in flight), and that the writer then reads the hold
// again: gone. Another update of the same group is not refused.
func TestHold_DeletedOnce(t *testing.T) {
	s, conn := openWatched(t, "holdonce")
	ctx := context.Background()
	held := func() string {
		t.Helper()
		var h string
		if err := conn.QueryRow(ctx, `SELECT held::text FROM accounts WHERE name = 'bob'`).Scan(&h); err != nil {
			t.Fatal(err)
		}
		return h
	}
	err := s.Update(ctx, func(tx holon.Tx) error {
		e, _ := journal.Transfer("signup:bob", "external:demo-credit", "bob", journal.MustParseAmount("5.00"))
		if err := tx.PostEntry(e); err != nil {
			return err
		}
		for _, r := range []string{"r1", "r2", "r3"} {
			if err := tx.PutHold(&holon.Hold{Receipt: r, Payer: "bob", Amount: journal.MustParseAmount("1.00"), Mandate: "m", Started: tx.Now()}); err != nil {
				return err
			}
			if err := tx.AddHeld("bob", journal.MustParseAmount("1.00")); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// Another gateway closes r1: its hold deleted, its amount released.
	if _, err := conn.Exec(ctx, `DELETE FROM holds WHERE receipt = 'r1'; UPDATE accounts SET held = held - 1 WHERE name = 'bob'`); err != nil {
		t.Fatal(err)
	}
	release := func(r string) func(holon.Tx) error {
		return func(tx holon.Tx) error {
			h, err := tx.Hold(r)
			if err != nil {
				return err
			}
			if err := tx.DeleteHold(r); err != nil {
				return err
			}
			return tx.AddHeld("bob", -h.Amount)
		}
	}
	errs := make(chan error, 2)
	for _, r := range []string{"r1", "r2"} {
		go func() { errs <- s.Update(ctx, release(r)) }()
	}
	var refused int
	for range 2 {
		switch err := <-errs; {
		case errors.Is(err, holon.ErrChangedMeanwhile):
			refused++
		case err != nil:
			t.Errorf("releasing a hold: %v", err)
		}
	}
	if refused != 1 {
		t.Errorf("%d releases refused ErrChangedMeanwhile, want r1's", refused)
	}
	if got := held(); got != "1.000000" {
		t.Errorf("bob holds %s, want 1.00 (r3's): each hold released once", got)
	}
	if err := s.Update(ctx, release("r1")); !errors.Is(err, holon.ErrNotFound) {
		t.Errorf("releasing r1 again: %v, want ErrNotFound (the writer read the hold again)", err)
	}
}
