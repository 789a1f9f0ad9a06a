package pg_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"holon.dev/holon"
	"holon.dev/holon/backup/pgtest"
	"holon.dev/holon/journal"
	"holon.dev/holon/kv/pg"
)

// rollupsOf reads owner's spend rollups by day and by agent, days 0 to
// 100, as "day value currency calls/amount/refunded" rows.
func rollupsOf(t *testing.T, s holon.Store, owner string) string {
	t.Helper()
	var out []string
	err := s.View(func(tx holon.Tx) error {
		for _, dim := range []byte{holon.ByDay, holon.ByAgent} {
			err := tx.ForEachRollup(holon.RollupSpend, owner, dim, 0, 100, func(k holon.RollupKey, ts holon.Tallies) error {
				for cur, x := range ts {
					out = append(out, fmt.Sprintf("%c %d %s %s %d/%s/%s", dim, k.Day, k.Value, cur, x.Calls, x.Amount, x.Refunded))
				}
				return nil
			})
			if err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return strings.Join(out, "; ")
}

// countRows counts a table's rows.
func countRows(t *testing.T, url, table string) int {
	t.Helper()
	c, err := pgx.Connect(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(context.Background())
	var n int
	if err := c.QueryRow(context.Background(), "SELECT count(*) FROM "+table).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// Ensure that the rollups' additions, kept as rows of arrays until they
// are folded (migrations/0015_rollup_deltas.sql), read exactly at every
// instant: three gateways adding at once while folds run beside them,
// among them on two handles at once, add up to what the updates that
// stood added (none of the refused ones), folded or not; that an
// addition below zero is judged on the sum, additions not folded yet
// included (it stands while the sum stays at or above zero, and is
// refused below); and that the leader of the job folds them.
func TestStore_RollupsFold(t *testing.T) {
	url := pgtest.Start(t).CreateDB(t, "fold")
	open := func(every time.Duration) *pg.Store {
		s, err := pg.OpenWith(context.Background(), url, holon.StoreOptions{NoSync: true}, pg.Options{FoldEvery: every})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
	stores := []*pg.Store{open(-1), open(-1), open(-1)}
	cent := journal.MustParseAmount("0.01")
	day := func(owner string) holon.RollupKey {
		return holon.RollupKey{Kind: holon.RollupSpend, Owner: owner, Dim: holon.ByDay, Day: 7}
	}
	refused := errors.New("refused")

	const per = 40
	var wg sync.WaitGroup
	stop := make(chan struct{})
	var folds sync.WaitGroup
	for f := range 2 {
		folds.Add(1)
		go func() {
			defer folds.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				case <-time.After(time.Millisecond):
				}
				// Serialization conflicts between folds leave rows to
				// the next fold; the sums are checked below.
				pg.Fold(stores[(i+f)%len(stores)])
			}
		}()
	}
	errs := make([][]error, len(stores))
	for g, s := range stores {
		errs[g] = make([]error, per)
		for i := range per {
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs[g][i] = s.Update(context.Background(), func(tx holon.Tx) error {
					if err := tx.AddRollup(day("ann"), "USD", holon.Tally{Calls: 1, Amount: cent}); err != nil {
						return err
					}
					k := holon.RollupKey{Kind: holon.RollupSpend, Owner: "ann", Dim: holon.ByAgent, Day: 7, Value: fmt.Sprintf("v%d", i%3)}
					if err := tx.AddRollup(k, "USD", holon.Tally{Calls: 1, Amount: cent, Refunded: cent}); err != nil {
						return err
					}
					if i%5 == 0 {
						return refused
					}
					return nil
				})
			}()
		}
	}
	wg.Wait()
	close(stop)
	folds.Wait()
	var ok [3]int64
	total := int64(0)
	for g := range stores {
		for i, err := range errs[g] {
			if i%5 == 0 {
				if !errors.Is(err, refused) {
					t.Fatalf("gateway %d, update %d: %v, want refused", g, i, err)
				}
				continue
			}
			if err != nil {
				t.Fatalf("gateway %d, update %d: %v", g, i, err)
			}
			ok[i%3]++
			total++
		}
	}
	tally := func(n int64, refunded bool) string {
		r := journal.Amount(0)
		if refunded {
			r = cent * journal.Amount(n)
		}
		return fmt.Sprintf("%d/%s/%s", n, cent*journal.Amount(n), r)
	}
	want := fmt.Sprintf("%c 7  USD %s; %c 7 v0 USD %s; %c 7 v1 USD %s; %c 7 v2 USD %s",
		holon.ByDay, tally(total, false), holon.ByAgent, tally(ok[0], true), holon.ByAgent, tally(ok[1], true), holon.ByAgent, tally(ok[2], true))
	for g, s := range stores {
		if got := rollupsOf(t, s, "ann"); got != want {
			t.Errorf("gateway %d, before the last fold:\n got %s\nwant %s", g, got, want)
		}
	}
	if err := pg.Fold(stores[0]); err != nil {
		t.Fatal(err)
	}
	if n := countRows(t, url, "rollup_deltas"); n != 0 {
		t.Errorf("%d rows of additions left after a fold", n)
	}
	for g, s := range stores {
		if got := rollupsOf(t, s, "ann"); got != want {
			t.Errorf("gateway %d, folded:\n got %s\nwant %s", g, got, want)
		}
	}

	// Below zero: judged on the sum, the additions not folded included.
	s := stores[1]
	add := func(d holon.Tally) error {
		return s.Update(context.Background(), func(tx holon.Tx) error { return tx.AddRollup(day("bo"), "USD", d) })
	}
	if err := add(holon.Tally{Calls: 2, Amount: 2 * cent}); err != nil {
		t.Fatal(err)
	}
	if countRows(t, url, "rollup_deltas") == 0 {
		t.Fatal("an addition was folded with no fold running")
	}
	if err := add(holon.Tally{Calls: -1, Amount: -cent}); err != nil {
		t.Errorf("taking one call of two away: %v", err)
	}
	byDay := string(holon.ByDay)
	if got, want := rollupsOf(t, s, "bo"), byDay+" 7  USD 1/0.01/0.00"; got != want {
		t.Errorf("after taking one away: %s, want %s", got, want)
	}
	for _, d := range []holon.Tally{{Calls: -2}, {Amount: -2 * cent}, {Refunded: -1}} {
		if err := add(d); err == nil {
			t.Errorf("adding %+v to one call: no error", d)
		}
	}
	if err := add(holon.Tally{Calls: 3}); err != nil {
		t.Fatal(err)
	}
	if got, want := rollupsOf(t, s, "bo"), byDay+" 7  USD 4/0.01/0.00"; got != want {
		t.Errorf("after the refused additions and three more calls: %s, want %s", got, want)
	}

	// A backlog (the job's leader away a while) folds in bounded
	// transactions, every row of it.
	c, err := pgx.Connect(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(context.Background())
	if _, err := c.Exec(context.Background(), `INSERT INTO rollup_deltas (kinds, owners, dims, days, vals, currencies, calls, amounts, refunded)
		SELECT '{s}', '{cy}', ARRAY[$1], '{7}', '{""}', '{USD}', '{1}', '{10000}', '{0}' FROM generate_series(1, 2500)`, byDay); err != nil {
		t.Fatal(err)
	}
	before := s.Folds()
	if err := pg.Fold(s); err != nil {
		t.Fatal(err)
	}
	if n := countRows(t, url, "rollup_deltas"); n != 0 {
		t.Errorf("%d rows of additions left after folding a backlog of 2,500", n)
	}
	if got := s.Folds() - before; got != 3 {
		t.Errorf("a backlog of 2,500 rows folded in %d transactions, want 3", got)
	}
	if got, want := rollupsOf(t, s, "cy"), byDay+" 7  USD 2500/25.00/0.00"; got != want {
		t.Errorf("the backlog folded: %s, want %s", got, want)
	}

	// The job: a handle that leads it folds what is there.
	if err := add(holon.Tally{Calls: 1}); err != nil {
		t.Fatal(err)
	}
	if countRows(t, url, "rollup_deltas") == 0 {
		t.Fatal("an addition was folded with no fold running")
	}
	leader := open(5 * time.Millisecond)
	deadline := time.Now().Add(10 * time.Second)
	for countRows(t, url, "rollup_deltas") > 0 {
		if time.Now().After(deadline) {
			t.Fatal("the additions not folded after 10 s with the job led")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if leader.Folds() == 0 {
		t.Error("the leading handle folded nothing")
	}
	if got, want := rollupsOf(t, leader, "bo"), byDay+" 7  USD 5/0.01/0.00"; got != want {
		t.Errorf("folded by the job: %s, want %s", got, want)
	}
}

// BenchmarkStore_RollupRead reads one owner's rollups by day over 90 days
// (a spend report's query) with the additions of a busy gateway pending:
// none (folded), a quarter of a second's (the fold's period), a second's
// and fifteen seconds' (a lease's worth: the job's leader died). Each
// pending row is a group of 31 settlements, four additions each, of 64
// payers, as in `holon bench` row [10].
func BenchmarkStore_RollupRead(b *testing.B) {
	url := pgtest.Start(b).CreateDB(b, "rollupread")
	s, err := pg.OpenWith(context.Background(), url, holon.StoreOptions{NoSync: true}, pg.Options{FoldEvery: -1})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	c, err := pgx.Connect(context.Background(), url)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close(context.Background())
	// A group's additions: 31 calls of payers p0..p63, four dimensions.
	add := func(rows int) {
		_, err := c.Exec(context.Background(), `INSERT INTO rollup_deltas (kinds, owners, dims, days, vals, currencies, calls, amounts, refunded)
			SELECT array_agg('s'::text), array_agg('p' || ((g * 31 + i) % 64)), array_agg(d), array_agg(20000), array_agg(CASE d WHEN 'd' THEN '' ELSE 'v' || i END),
				array_agg('USD'::text), array_agg(1::bigint), array_agg(10000::bigint), array_agg(0::bigint)
			FROM generate_series(1, $1) g, generate_series(1, 31) i, unnest('{d,m,a,k}'::text[]) d GROUP BY g`, rows)
		if err != nil {
			b.Fatal(err)
		}
	}
	add(2000)
	if err := pg.Fold(s); err != nil {
		b.Fatal(err)
	}
	for _, pending := range []int{0, 28, 113, 1700} {
		b.Run(fmt.Sprintf("pending=%d", pending), func(b *testing.B) {
			if _, err := c.Exec(context.Background(), `DELETE FROM rollup_deltas`); err != nil {
				b.Fatal(err)
			}
			add(pending)
			for b.Loop() {
				err := s.View(func(tx holon.Tx) error {
					return tx.ForEachRollup(holon.RollupSpend, "p7", holon.ByDay, 20000-89, 20000, func(holon.RollupKey, holon.Tallies) error { return nil })
				})
				if err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
