package backup

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"holon.dev/holon"
	"holon.dev/holon/journal"
)

// CheckRollups is the check of the spend and earnings rollups.
const CheckRollups = "rollups"

// rollupCell is one rollup row's tally in one currency.
type rollupCell struct {
	k   holon.RollupKey
	cur string
}

// rollups recomputes the rollups from the receipts, the journal and the
// refunds, and compares every row: a payer's spend by day, mandate (the
// root of the calls its payer paid) and agent exactly; by key, each day's
// keys add up to the day's calls and charge (a receipt does not keep its
// key); an author's earnings, its versions' rows together, per day,
// exactly what the settle entries paid it less what refund entries took
// back, and its paid calls. A store whose rollups are not kept yet (the
// gateway rebuilds them as it starts) passes with nothing to check.
func (v *verifier) rollups() error {
	c := v.c[CheckRollups]
	if !v.tx.RollupsKept() {
		c.Covered = "not kept yet: the gateway rebuilds them from the receipts as it starts"
		return nil
	}
	want := map[rollupCell]holon.Tally{}
	add := func(kind byte, owner string, dim byte, day holon.Day, value, cur string, d holon.Tally) {
		k := rollupCell{holon.RollupKey{Kind: kind, Owner: owner, Dim: dim, Day: day, Value: value}, cur}
		x := want[k]
		x.Calls, x.Amount, x.Refunded = x.Calls+d.Calls, x.Amount+d.Amount, x.Refunded+d.Refunded
		want[k] = x
	}
	calls := 0
	err := v.tx.ForEachReceipt(func(r *holon.Receipt) error {
		if err := v.tick(); err != nil {
			return err
		}
		if !r.Billed || r.Cost.Own <= 0 || r.Agent == nil {
			return nil
		}
		row, err := v.tx.EntryByKey("settle:" + r.ID)
		if errors.Is(err, holon.ErrNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		calls++
		root, err := v.rootMandate(r)
		if err != nil {
			return err
		}
		day := holon.DayOf(r.Created)
		spend := func(day holon.Day, d holon.Tally) {
			add(holon.RollupSpend, r.Payer, holon.ByDay, day, "", r.Currency, d)
			add(holon.RollupSpend, r.Payer, holon.ByMandate, day, root, r.Currency, d)
			add(holon.RollupSpend, r.Payer, holon.ByAgent, day, *r.Agent, r.Currency, d)
		}
		spend(day, holon.Tally{Calls: 1, Amount: r.Cost.Own})
		author, _, _ := strings.Cut(*r.Agent, "/")
		add(holon.RollupEarnings, author, 0, day, "", r.Currency, holon.Tally{Calls: 1})
		earned := func(lines []journal.Line, day holon.Day, sign journal.Amount) {
			for _, l := range lines {
				got := l.Amount * sign
				if l.Account == r.Payer {
					got += r.Cost.Own * sign // the payer's debit, netted with its own share
				}
				if l.Account == journal.PlatformAccount || got == 0 {
					continue
				}
				d := holon.Tally{Amount: got}
				if sign < 0 {
					d = holon.Tally{Refunded: got}
				}
				add(holon.RollupEarnings, l.Account, 0, day, "", r.Currency, d)
			}
		}
		earned(row.Lines, day, 1)
		refunds, err := holon.Refunds(v.tx, r.ID)
		if err != nil {
			return err
		}
		for _, f := range refunds {
			fday := holon.DayOf(f.Created)
			spend(fday, holon.Tally{Refunded: f.Amount})
			fr, err := v.tx.EntryByKey(f.Entry)
			if err != nil {
				return fmt.Errorf("refund %s: %w", f.ID, err)
			}
			var lines []journal.Line
			for _, l := range fr.Lines {
				if l.Account != r.Payer {
					lines = append(lines, l)
				}
			}
			earned(lines, fday, -1)
		}
		return nil
	})
	if err != nil {
		return err
	}
	got := map[rollupCell]holon.Tally{}
	keys := map[rollupCell]holon.Tally{} // by key, summed per payer and day
	rows := 0
	err = v.tx.ForEachRollupRow(func(k holon.RollupKey, ts holon.Tallies) error {
		rows++
		for cur, t := range ts {
			switch {
			case k.Kind == holon.RollupSpend && k.Dim == holon.ByKey:
				d := rollupCell{holon.RollupKey{Kind: k.Kind, Owner: k.Owner, Dim: holon.ByDay, Day: k.Day}, cur}
				x := keys[d]
				x.Calls, x.Amount, x.Refunded = x.Calls+t.Calls, x.Amount+t.Amount, x.Refunded+t.Refunded
				keys[d] = x
			case k.Kind == holon.RollupEarnings && k.Dim == holon.ByVersion:
				if author, _, _ := strings.Cut(k.Value, "/"); author != k.Owner {
					c.fail("earnings row of %s under author %s", k.Value, k.Owner)
				}
				d := rollupCell{holon.RollupKey{Kind: k.Kind, Owner: k.Owner, Day: k.Day}, cur}
				x := got[d]
				x.Calls, x.Amount, x.Refunded = x.Calls+t.Calls, x.Amount+t.Amount, x.Refunded+t.Refunded
				got[d] = x
			default:
				got[rollupCell{k, cur}] = t
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	var cells []rollupCell
	for k := range want {
		cells = append(cells, k)
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			cells = append(cells, k)
		}
	}
	slices.SortFunc(cells, func(a, b rollupCell) int { return strings.Compare(describeCell(a), describeCell(b)) })
	for _, k := range cells {
		if want[k] != got[k] {
			c.fail("%s: the rollup says %s, the receipts and the journal %s", describeCell(k), describeTally(got[k]), describeTally(want[k]))
		}
	}
	for k, t := range keys {
		day := got[k]
		if t.Calls != day.Calls || t.Amount != day.Amount || t.Refunded != 0 {
			c.fail("%s: its keys add up to %s, the day to %s", describeCell(k), describeTally(t), describeTally(day))
		}
	}
	c.Covered = fmt.Sprintf("%d rows against %d settled calls", rows, calls)
	return nil
}

// rootMandate is the mandate a receipt's spend counts under: up the tree
// while the same payer paid.
func (v *verifier) rootMandate(r *holon.Receipt) (string, error) {
	for cur := r; ; {
		if cur.Parent == nil {
			return cur.Mandate, nil
		}
		p, err := v.tx.Receipt(*cur.Parent)
		if err != nil {
			return "", fmt.Errorf("parent %s of %s: %w", *cur.Parent, cur.ID, err)
		}
		if p.Payer != cur.Payer {
			return cur.Mandate, nil
		}
		cur = p
	}
}

func describeCell(k rollupCell) string {
	kind := "spend of"
	if k.k.Kind == holon.RollupEarnings {
		kind = "earnings of"
	}
	by := map[byte]string{holon.ByDay: "", holon.ByMandate: " mandate ", holon.ByAgent: " agent ", holon.ByKey: " key ", holon.ByVersion: " version "}[k.k.Dim]
	return fmt.Sprintf("%s %s on %s%s%s in %s", kind, k.k.Owner, k.k.Day, by, k.k.Value, k.cur)
}

func describeTally(t holon.Tally) string {
	return fmt.Sprintf("%d calls, %s charged, %s refunded", t.Calls, t.Amount, t.Refunded)
}
