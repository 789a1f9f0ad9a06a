package pg_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"holon.dev/holon"
	"holon.dev/holon/gateway/storetest"
	"holon.dev/holon/journal"
	"holon.dev/holon/kv/pg"
)

// Ensure that the rows every settlement credits are kept in one part per
// gateway (migration 24): a gateway whose writer extends chain n > 0
// writes its credits to an account's part n and its additions to a
// record's, every other change to part 0, and every read is the sum; the
// database judges an account's availability and a record's counts on the
// sums, and refuses to lower a part.
func TestParts_CreditsOnePartAGateway(t *testing.T) {
	dbs, url, a, b := twoGateways(t, "parts")
	ctx := context.Background()
	conn := dbs.srv.Connect(t, url)
	amt := journal.MustParseAmount
	update := func(s *pg.Store, fn func(tx holon.Tx) error) error {
		return s.Update(ctx, fn)
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	// bob is funded through a; each gateway settles a call of his: his
	// debit, the platform's and the author's credits, the agent's record.
	must(update(a, func(tx holon.Tx) error {
		e, _ := journal.Transfer("signup:bob", "external:demo-credit", "bob", amt("5.00"))
		return tx.PostEntry(e)
	}))
	settle := func(s *pg.Store, key string) {
		t.Helper()
		must(update(s, func(tx holon.Tx) error {
			e := journal.Entry{Key: key, Lines: []journal.Line{
				{Account: "bob", Amount: -amt("1.00")},
				{Account: journal.PlatformAccount, Amount: amt("0.10")},
				{Account: "acme", Amount: amt("0.90")},
			}}
			if err := tx.PostEntry(e); err != nil {
				return err
			}
			return tx.PostEvent(holon.Event{Receipt: strings.TrimPrefix(key, "settle:"), Agent: "acme/a@1.0.0", Status: holon.StatusSucceeded,
				DurationMS: 7, Billed: amt("1.00"), Currency: "EUR", Time: tx.Now()}, true)
		}))
	}
	settle(b, "settle:r1")
	settle(a, "settle:r2")
	settle(b, "settle:r3")

	parts := func(table, key, name string) map[int]string {
		t.Helper()
		col := "balance::text || '/' || held::text"
		if table == "agent_records" {
			col = "runs || '/' || succeeded || '/' || billed::text || '/' || duration_ms"
		}
		rows, err := conn.Query(ctx, `SELECT part, `+col+` FROM `+table+` WHERE `+key+` = $1`, name)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		out := map[int]string{}
		for rows.Next() {
			var p int
			var v string
			if err := rows.Scan(&p, &v); err != nil {
				t.Fatal(err)
			}
			out[p] = v
		}
		return out
	}
	for _, tt := range []struct {
		table, key, name string
		want             map[int]string
	}{
		{"accounts", "name", "bob", map[int]string{0: "2.000000/0.000000"}},
		{"accounts", "name", journal.PlatformAccount, map[int]string{0: "0.100000/0.000000", 1: "0.200000/0.000000"}},
		{"accounts", "name", "acme", map[int]string{0: "0.900000/0.000000", 1: "1.800000/0.000000"}},
		{"agent_records", "agent", "acme/a@1.0.0", map[int]string{0: "1/1/1.000000/7", 1: "2/2/2.000000/14"}},
	} {
		if got := parts(tt.table, tt.key, tt.name); !equalMaps(got, tt.want) {
			t.Errorf("%s %s in parts %v, want %v", tt.table, tt.name, got, tt.want)
		}
	}

	// Every read is the sum, whichever gateway reads.
	for _, s := range []*pg.Store{a, b} {
		err := s.View(func(tx holon.Tx) error {
			acme, err := tx.Account("acme")
			if err != nil {
				return err
			}
			if acme.Balance != amt("2.70") {
				t.Errorf("acme's balance %s, want 2.70", acme.Balance)
			}
			rec, err := tx.Record("acme/a@1.0.0")
			if err != nil {
				return err
			}
			if rec.Runs != 3 || rec.Succeeded != 3 || rec.Billed != amt("3.00") || rec.DurationMS != 21 {
				t.Errorf("the record %+v, want 3 runs, 3 succeeded, 3.00 billed, 21 ms", rec)
			}
			var names []string
			err = tx.ForEachAccount(func(name string, acct holon.Account) error {
				names = append(names, name)
				if name == journal.PlatformAccount && acct.Balance != amt("0.30") {
					t.Errorf("the platform's balance listed %s, want 0.30", acct.Balance)
				}
				return nil
			})
			if len(names) != 4 {
				t.Errorf("accounts listed %v, want each once", names)
			}
			return err
		})
		must(err)
	}

	// A debit goes to part 0 and is judged on the sum: acme pays out 2.00
	// through b, more than its part 0 holds; 0.80 more is refused.
	payout := func(s *pg.Store, key string, x journal.Amount) error {
		return update(s, func(tx holon.Tx) error {
			e, _ := journal.Transfer(key, "acme", "external:payout", x)
			return tx.PostEntry(e)
		})
	}
	must(payout(b, "payout:1", amt("2.00")))
	if got := parts("accounts", "name", "acme"); got[0] != "-1.100000/0.000000" || got[1] != "1.800000/0.000000" {
		t.Errorf("acme after its payout: %v, want part 0 at -1.10, part 1 untouched", got)
	}
	if err := payout(a, "payout:2", amt("0.80")); !errors.Is(err, holon.ErrOverdrawn) {
		t.Errorf("paying out 0.80 of 0.70: %v, want ErrOverdrawn", err)
	}
	// The database judges the sum too, and keeps parts from going down.
	for _, tt := range []struct{ sql, want string }{
		{`UPDATE accounts SET balance = balance - 0.71 WHERE name = 'acme' AND part = 0`, "account acme is overdrawn"},
		{`UPDATE accounts SET balance = balance - 0.01 WHERE name = 'acme' AND part = 1`, "accounts acme part 1 would go down"},
		{`UPDATE agent_records SET billed = billed - 3.01 WHERE agent = 'acme/a@1.0.0' AND part = 0`, "the record of acme/a@1.0.0 would count 3 runs, 3 succeeded, -0.010000 billed"},
		{`UPDATE agent_records SET runs = runs - 1, succeeded = succeeded - 1 WHERE agent = 'acme/a@1.0.0' AND part = 1`, "agent_records acme/a@1.0.0 part 1 would go down"},
	} {
		tx, err := conn.Begin(ctx)
		must(err)
		_, err = tx.Exec(ctx, tt.sql)
		if err == nil {
			err = tx.Commit(ctx)
		} else {
			tx.Rollback(ctx)
		}
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: %v, want %q", tt.sql, err, tt.want)
		}
	}
	// A refund takes billing off part 0 of the record, judged on the sum.
	must(update(a, func(tx holon.Tx) error { return tx.RefundRecord("acme/a@1.0.0", amt("2.50")) }))
	if got := parts("agent_records", "agent", "acme/a@1.0.0"); got[0] != "1/1/-1.500000/7" || got[1] != "2/2/2.000000/14" {
		t.Errorf("the record after a refund: %v, want part 0 billed -1.50, part 1 untouched", got)
	}
	must(b.View(func(tx holon.Tx) error {
		rec, err := tx.Record("acme/a@1.0.0")
		if err == nil && rec.Billed != amt("0.50") {
			t.Errorf("the record billed %s after the refund, want 0.50", rec.Billed)
		}
		return err
	}))
	storetest.CheckMoney(t, a, storetest.Foreign("settle:r1", "settle:r2", "settle:r3"))
	verifyJournal(t, b)
}

// twoGateways opens two stores on a new database: a extends the journal's
// chain 0, b chain 1.
func twoGateways(t *testing.T, name string) (dbs *databases, url string, a, b *pg.Store) {
	t.Helper()
	dbs = newDatabases(t)
	url = dbs.url(t, name)
	open := func() *pg.Store {
		s, err := pg.Open(context.Background(), url, holon.StoreOptions{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
	a, b = open(), open()
	if a.Chain() != 0 || b.Chain() != 1 {
		t.Fatalf("chains %d and %d, want 0 and 1", a.Chain(), b.Chain())
	}
	return dbs, url, a, b
}

func equalMaps(a, b map[int]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// Ensure that a version's earnings and latency are kept in one part per
// gateway too: each gateway adds to its own part (PartKey), every read is
// the sum, and a refund goes to part 0, refused only when the sum would go
// below zero.
func TestParts_EarningsAndLatency(t *testing.T) {
	dbs, url, a, b := twoGateways(t, "docparts")
	ctx := context.Background()
	amt := journal.MustParseAmount
	const ref = "acme/a@1.0.0"
	earn := func(s *pg.Store, calls int64, own journal.Amount, ms int64) error {
		return s.Update(ctx, func(tx holon.Tx) error {
			if err := tx.AddEarnings(ref, "EUR", calls, own, 0); err != nil {
				return err
			}
			if ms < 0 {
				return nil
			}
			return tx.AddLatency(ref, ms)
		})
	}
	for _, x := range []struct {
		s  *pg.Store
		ms int64
	}{{a, 3}, {b, 40}, {b, 40}, {a, 700}} {
		if err := earn(x.s, 1, amt("0.90"), x.ms); err != nil {
			t.Fatal(err)
		}
	}
	// Another version whose ref the first begins: its rows sort after the
	// first's parts and are not counted in them.
	if err := a.Update(ctx, func(tx holon.Tx) error { return tx.AddEarnings(ref+"-beta", "EUR", 1, amt("5.00"), 0) }); err != nil {
		t.Fatal(err)
	}
	var keys []string
	rows, err := dbs.srv.Connect(t, url).Query(ctx, `SELECT bucket || ':' || key FROM app_docs WHERE bucket IN ('earnings', 'latency') ORDER BY bucket, key_bytes`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var k string
		rows.Scan(&k)
		keys = append(keys, k)
	}
	rows.Close()
	want := []string{"earnings:" + ref, "earnings:" + ref + " 1", "earnings:" + ref + "-beta", "latency:" + ref, "latency:" + ref + " 1"}
	if strings.Join(keys, ",") != strings.Join(want, ",") {
		t.Errorf("documents %v, want %v", keys, want)
	}
	check := func(s *pg.Store, calls int64, own string) {
		t.Helper()
		err := s.View(func(tx holon.Tx) error {
			e, err := tx.Earnings(ref)
			if err != nil {
				return err
			}
			if x := e["EUR"]; x.PaidCalls != calls || x.Own != amt(own) {
				t.Errorf("earnings %+v, want %d paid calls, %s own", x, calls, own)
			}
			var listed []string
			err = tx.ForEachEarnings("acme/", func(r string, e holon.Earnings) error {
				listed = append(listed, r)
				if r == ref && (e["EUR"].PaidCalls != calls || e["EUR"].Own != amt(own)) {
					t.Errorf("earnings listed %+v, want the sum", e["EUR"])
				}
				return nil
			})
			if err != nil {
				return err
			}
			if strings.Join(listed, ",") != ref+","+ref+"-beta" {
				t.Errorf("earnings listed for %v, want each version once", listed)
			}
			l, err := tx.Latency(ref)
			if err != nil {
				return err
			}
			runs := map[int]int64{holon.LatencyBucket(3): 1, holon.LatencyBucket(40): 2, holon.LatencyBucket(700): 1}
			for i, c := range l.Counts {
				if c != runs[i] {
					t.Errorf("latency %v, want %v by bucket", l.Counts, runs)
					break
				}
			}
			n := 0
			err = tx.ForEachLatency(func(r string, l holon.Latency) error {
				n++
				var sum int64
				for _, c := range l.Counts {
					sum += c
				}
				if r != ref || sum != 4 {
					t.Errorf("latency listed %s with %d runs, want %s with 4", r, sum, ref)
				}
				return nil
			})
			if n != 1 {
				t.Errorf("latency listed %d versions, want 1", n)
			}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	check(a, 4, "3.60")
	check(b, 4, "3.60")
	// A refund through b of more than part 0 holds (1.80) but not more than
	// the sum; then one more than what is left.
	if err := earn(b, -2, -amt("2.50"), -1); err != nil {
		t.Fatalf("a refund within the sum: %v", err)
	}
	check(a, 2, "1.10")
	if err := earn(a, -1, -amt("1.20"), -1); !errors.Is(err, holon.ErrEarningsBelowZero) {
		t.Errorf("a refund of more than the sum: %v, want ErrEarningsBelowZero", err)
	}
	check(b, 2, "1.10")
}

// Ensure that counters are kept in one part per gateway (migration 25):
// a rise goes to the writer's part, any other move to part 0, every read
// is the sum, and the database judges the sum and keeps parts from going
// down; a new receipt counted through the writer's part.
func TestParts_Counters(t *testing.T) {
	dbs, url, a, b := twoGateways(t, "counterparts")
	ctx := context.Background()
	conn := dbs.srv.Connect(t, url)
	add := func(s *pg.Store, d int64) (n uint64, err error) {
		err = s.Update(ctx, func(tx holon.Tx) (err error) {
			n, err = tx.AddCounter("n", d)
			return err
		})
		return n, err
	}
	for _, x := range []struct {
		s    *pg.Store
		d    int64
		want uint64
	}{{a, 2, 2}, {b, 3, 5}, {b, -4, 1}} {
		if n, err := add(x.s, x.d); err != nil || n != x.want {
			t.Fatalf("AddCounter(n, %d) = %d, %v; want %d", x.d, n, err, x.want)
		}
	}
	if _, err := add(a, -2); err == nil {
		t.Error("a counter of 1 taken 2 below zero")
	}
	var parts string
	if err := conn.QueryRow(ctx, `SELECT string_agg(part || ':' || value, ',' ORDER BY part) FROM counters WHERE name = 'n'`).Scan(&parts); err != nil || parts != "0:-2,1:3" {
		t.Errorf("the counter's parts %q (%v), want 0:-2,1:3", parts, err)
	}
	for _, s := range []*pg.Store{a, b} {
		s.View(func(tx holon.Tx) error {
			if n := tx.Counter("n"); n != 1 {
				t.Errorf("Counter(n) = %d, want the sum, 1", n)
			}
			return nil
		})
	}
	for _, tt := range []struct{ sql, want string }{
		{`UPDATE counters SET value = value - 2 WHERE name = 'n' AND part = 0`, "counter n would go below zero (-1)"},
		{`UPDATE counters SET value = value - 1 WHERE name = 'n' AND part = 1`, "counters n part 1 would go down"},
	} {
		tx, err := conn.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err = tx.Exec(ctx, tt.sql); err == nil {
			err = tx.Commit(ctx)
		} else {
			tx.Rollback(ctx)
		}
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: %v, want %q", tt.sql, err, tt.want)
		}
	}
	// A new receipt, put through b, counts in b's part of the receipts'
	// counters, whether b knew the receipt absent (its id just handed
	// out) or not (counted by the database in the receipt's statement).
	for i := range 2 {
		err := b.Update(ctx, func(tx holon.Tx) error {
			id := "r900001"
			if i == 1 {
				var err error
				if id, err = tx.NewReceiptID(); err != nil {
					return err
				}
			}
			return tx.PutReceipt(&holon.Receipt{ID: id, Mandate: "m", Caller: "bob", Payer: "bob", Currency: "EUR",
				Status: holon.StatusRunning, Created: tx.Now()})
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := conn.QueryRow(ctx, `SELECT string_agg(name || '@' || part || ':' || value, ',' ORDER BY name, part) FROM counters WHERE name LIKE 'receipts%'`).Scan(&parts); err != nil || parts != "receipts@1:2,receipts:m@1:2" {
		t.Errorf("the receipts' counters %q (%v), want b's part of each at 2", parts, err)
	}
	storetest.CheckMoney(t, a, storetest.AllowHolds, storetest.SkipReceipts)
}
