package pg_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"

	"holon.dev/holon"
	"holon.dev/holon/journal"
	"holon.dev/holon/kv/pg"
)

// credit appends n entries through s, keys prefix:0…, each crediting
// acct from the demo credit, and returns the rows AppendEntry gave.
func credit(t *testing.T, s holon.Store, prefix, acct string, n int) []holon.JournalRow {
	t.Helper()
	rows := make([]holon.JournalRow, n)
	for i := range n {
		err := s.Update(context.Background(), func(tx holon.Tx) (err error) {
			e, _ := journal.Transfer(fmt.Sprintf("%s:%d", prefix, i), "external:demo-credit", acct, journal.MustParseAmount("0.01"))
			rows[i], err = tx.AppendEntry(e)
			return err
		})
		if err != nil {
			t.Error(err)
			return nil
		}
	}
	return rows
}

// chainOf is the rows of the journal whose keys begin with prefix, in
// order, after checking that each follows the one before it: one chain,
// beginning at first.
func chainOf(t *testing.T, s holon.Store, prefix, first string) []holon.JournalRow {
	t.Helper()
	var out []holon.JournalRow
	err := s.View(func(tx holon.Tx) error {
		return tx.ForEachEntry(0, func(r holon.JournalRow) (bool, error) {
			if strings.HasPrefix(r.Key, prefix+":") {
				out = append(out, r)
			}
			return true, nil
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	prev := first
	for _, r := range out {
		if r.Prev != prev {
			t.Fatalf("%s's row %d (%s) follows %.16s, want %.16s: not one chain", prefix, r.Seq, r.Key, r.Prev, prev)
		}
		prev = r.Hash
	}
	return out
}

// postAtOnce posts 40 entries through a (keys a:0…) and 40 through b
// (b:0…) at once, four callers a gateway from one start, so that both
// writers have updates queued the whole time (one caller each could
// finish before the other began, on a loaded machine); with stand, it
// checks that the run tested what it is for: some of the updates each
// writer ran while it waited for the lock stood, numbered from its own
// blocks while the other's entries were numbered and committed meanwhile.
func postAtOnce(t *testing.T, a, b *pg.Store, stand bool) {
	t.Helper()
	var wg sync.WaitGroup
	start := make(chan struct{})
	for prefix, s := range map[string]*pg.Store{"a": a, "b": b} {
		for c := range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				for i := c; i < 40; i += 4 {
					err := s.Update(context.Background(), func(tx holon.Tx) error {
						e, _ := journal.Transfer(fmt.Sprintf("%s:%d", prefix, i), "external:demo-credit", "acct-"+prefix, journal.MustParseAmount("0.01"))
						return tx.PostEntry(e)
					})
					if err != nil {
						t.Error(err)
						return
					}
				}
			}()
		}
	}
	close(start)
	wg.Wait()
	for _, s := range []*pg.Store{a, b} {
		if !stand {
			break
		}
		if _, _, kept, _ := s.WaitRuns(); kept == 0 {
			t.Error("no update run while its writer waited for the lock stood: the test shows nothing of entries moved onto another gateway's")
		}
	}
}

func verifyJournal(t *testing.T, s holon.Store) {
	t.Helper()
	if err := s.View(func(tx holon.Tx) error { return tx.(*pg.Tx).VerifyJournal() }); err != nil {
		t.Fatal(err)
	}
}

// Ensure that each gateway's writer extends a chain of its own, numbered
// from 0, while their rows interleave in one sequence; that the journal
// verifies with a head a chain; and that a chain given back (its gateway
// closed) is claimed by the next gateway to start, which goes on with it.
func TestChains_OneAGateway(t *testing.T) {
	turns(t)
	dbs := newDatabases(t)
	url := dbs.url(t, "chains")
	ctx := context.Background()
	open := func() *pg.Store {
		s, err := pg.Open(ctx, url, holon.StoreOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	a, b := open(), open()
	defer a.Close()
	if a.Chain() != 0 || b.Chain() != 1 {
		t.Fatalf("chains %d and %d, want 0 and 1", a.Chain(), b.Chain())
	}
	postAtOnce(t, a, b, true)
	ra, rb := chainOf(t, a, "a", ""), chainOf(t, a, "b", "")
	if len(ra) != 40 || len(rb) != 40 {
		t.Fatalf("%d and %d rows, want 40 each", len(ra), len(rb))
	}
	interleaved := false
	for i := 1; i < len(ra); i++ {
		interleaved = interleaved || ra[i].Seq != ra[i-1].Seq+1
	}
	if !interleaved {
		t.Error("the two gateways' rows did not interleave: the test shows nothing")
	}
	verifyJournal(t, a)
	var heads []string
	a.View(func(tx holon.Tx) (err error) { heads, err = tx.(*pg.Tx).JournalHeads(); return err })
	if len(heads) != 2 {
		t.Errorf("heads %v, want two", heads)
	}

	b.Close()
	c := open()
	defer c.Close()
	if c.Chain() != 1 {
		t.Fatalf("the gateway started after the second closed claims chain %d, want its chain 1", c.Chain())
	}
	credit(t, c, "c", "acct-c", 3)
	if rc := chainOf(t, c, "c", rb[len(rb)-1].Hash); len(rc) != 3 {
		t.Fatalf("%d rows of the third gateway", len(rc))
	}
	verifyJournal(t, c)
}

// Ensure that a gateway whose lease ran out while it still runs, its
// chain claimed by a gateway that started meanwhile, keeps the chain one,
// in the order of its numbers: under the writers' lock each chains on the
// other's head once the log shows it moved, its entries numbered from a
// block taken after the other's (an update run while its writer waited,
// on a head that moved meanwhile, runs again).
func TestChains_ClaimedFromALiveGateway(t *testing.T) {
	dbs := newDatabases(t)
	url := dbs.url(t, "stale")
	ctx := context.Background()
	a, err := pg.Open(ctx, url, holon.StoreOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	// Its lease runs out (it renews every 5 s: not within this test).
	if _, err := conn.Exec(ctx, `UPDATE gateways SET expires = now() - interval '1 second' WHERE id = $1`, a.ID()); err != nil {
		t.Fatal(err)
	}
	b, err := pg.Open(ctx, url, holon.StoreOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if a.Chain() != 0 || b.Chain() != 0 {
		t.Fatalf("chains %d and %d, want the second gateway to claim the first's, 0", a.Chain(), b.Chain())
	}
	postAtOnce(t, a, b, false)
	var all []holon.JournalRow
	a.View(func(tx holon.Tx) error {
		return tx.ForEachEntry(0, func(r holon.JournalRow) (bool, error) { all = append(all, r); return true, nil })
	})
	prev := ""
	for _, r := range all {
		if r.Prev != prev {
			t.Fatalf("row %d (%s) follows %.16s, want %.16s: the shared chain forked", r.Seq, r.Key, r.Prev, prev)
		}
		prev = r.Hash
	}
	if len(all) != 80 {
		t.Fatalf("%d rows, want 80", len(all))
	}
	verifyJournal(t, a)
	verifyJournal(t, b)
}
