package gateway_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"holon.dev/holon"
	"holon.dev/holon/gateway"
	"holon.dev/holon/journal"
)

// bruteReport recomputes a report from the receipts and refunds alone:
// every billed receipt with a settle entry counts its cost.own on its
// UTC day under its payer, its root mandate (up the tree while the same
// payer paid), its agent and the key the test made its root call with;
// every refund counts on its own day (not by key). An author's earnings
// by day are what the settle entries paid its account, less what refund
// entries took back.
type bruteReport struct {
	spend    map[string]map[string]holon.Tally // "payer by" → group/currency → tally
	earnings map[string]map[string]holon.Tally // author → day/currency → net
}

func bruteRecompute(t *testing.T, te *testEngine, keys map[string]string) bruteReport {
	t.Helper()
	out := bruteReport{spend: map[string]map[string]holon.Tally{}, earnings: map[string]map[string]holon.Tally{}}
	add := func(m map[string]map[string]holon.Tally, owner, group, cur string, d holon.Tally) {
		if m[owner] == nil {
			m[owner] = map[string]holon.Tally{}
		}
		x := m[owner][group+"|"+cur]
		x.Calls += d.Calls
		x.Amount += d.Amount
		x.Refunded += d.Refunded
		m[owner][group+"|"+cur] = x
	}
	err := te.store.View(func(tx holon.Tx) error {
		all := map[string]*holon.Receipt{}
		for before := ""; ; {
			page, err := tx.Receipts("", before, 500)
			if err != nil {
				return err
			}
			for _, r := range page.Receipts {
				all[r.ID] = r
			}
			if page.Next == "" {
				break
			}
			before = page.Next
		}
		for _, r := range all {
			if !r.Billed || r.Cost.Own <= 0 {
				continue
			}
			row, err := tx.EntryByKey("settle:" + r.ID)
			if err != nil {
				continue
			}
			root := r
			for root.Parent != nil && all[*root.Parent].Payer == root.Payer {
				root = all[*root.Parent]
			}
			day := holon.DayOf(r.Created).String()
			groups := map[string]string{"day": day, "mandate": root.Mandate, "agent": *r.Agent, "key": keys[root.ID]}
			for by, g := range groups {
				add(out.spend, r.Payer+" "+by, g, r.Currency, holon.Tally{Calls: 1, Amount: r.Cost.Own})
			}
			author, _, _ := strings.Cut(*r.Agent, "/")
			paid := func(lines []journal.Line, day string, sign journal.Amount) {
				for _, l := range lines {
					got := l.Amount * sign
					if l.Account == r.Payer {
						got += r.Cost.Own * sign // the payer's debit, netted with its own share
					}
					if l.Account != journal.PlatformAccount && got != 0 {
						d := holon.Tally{Amount: got}
						if sign < 0 {
							d = holon.Tally{Refunded: got}
						}
						add(out.earnings, l.Account, day, r.Currency, d)
					}
				}
			}
			paid(row.Lines, day, 1)
			add(out.earnings, author, day, r.Currency, holon.Tally{Calls: 1})
			refunds, err := holon.Refunds(tx, r.ID)
			if err != nil {
				return err
			}
			for _, f := range refunds {
				fday := holon.DayOf(f.Created).String()
				for _, by := range []string{"day", "mandate", "agent"} {
					g := groups[by]
					if by == "day" {
						g = fday
					}
					add(out.spend, r.Payer+" "+by, g, r.Currency, holon.Tally{Refunded: f.Amount})
				}
				fr, err := tx.EntryByKey(f.Entry)
				if err != nil {
					return err
				}
				var lines []journal.Line
				for _, l := range fr.Lines {
					if l.Account != r.Payer {
						lines = append(lines, l)
					}
				}
				paid(lines, fday, -1)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// rows writes a report's rows, or the brute force's, the same way.
func reportRows(r *gateway.Report) []string {
	var out []string
	for _, row := range r.Rows {
		out = append(out, fmt.Sprintf("%s|%s %d/%s/%s", row.Group, row.Currency, row.Calls, row.Amount, row.Refunded))
	}
	slices.Sort(out)
	return out
}

func bruteRows(m map[string]holon.Tally, from, to holon.Day, byDay bool) []string {
	var out []string
	for g, x := range m {
		if byDay {
			d, _ := holon.ParseDay(strings.Split(g, "|")[0])
			if d < from || d > to {
				continue
			}
		}
		out = append(out, fmt.Sprintf("%s %d/%s/%s", g, x.Calls, x.Amount, x.Refunded))
	}
	slices.Sort(out)
	return out
}

// Ensure that the spend and earnings reports, for every by and over
// ranges that cut days off either end, equal a recomputation from the
// receipts, the journal and the refunds, after random calls (direct,
// through a royalty chain, passthrough children) made with random keys
// over six days and random refunds made on later days.
func TestEngine_Reports_EqualBruteForce(t *testing.T) {
	clock := newTestClock()
	h := testHandlers()
	h["script"] = scriptHandler
	te := openEngine(t, engineConfig{manifests: refundAgents, handlers: h, mandates: []string{refundMandate, acmeSpend}, clock: clock})
	rng := rand.New(rand.NewPCG(24, 2))
	ctx := context.Background()
	keys := map[string]string{}
	var billed []*holon.Receipt
	start := holon.DayOf(clock.Now())
	for day := 0; day < 6; day++ {
		for range 12 {
			clock.Advance(time.Duration(rng.IntN(90)) * time.Minute / 12)
			key := []string{"", "hlk_a_key1", "hlk_h_key2"}[rng.IntN(3)]
			in := gateway.CallInput{Mandate: "alice/refunds", Key: key}
			switch rng.IntN(4) {
			case 0:
				in.Agent = "bob/fork2"
			case 1:
				in.Agent = "lena/base"
			case 2:
				in.Agent, in.Input = "acme/orch-fork", script(scriptCall{Agent: "bob/fork2"})
			case 3:
				in.Mandate, in.Agent = "acme/spend", "lena/base"
			}
			res, err := te.eng.Call(ctx, in)
			if err != nil || res.Receipt.Status != holon.StatusSucceeded {
				t.Fatalf("call %+v: %v %s", in, err, res.Message)
			}
			keys[res.Receipt.ID] = key
			billed = append(billed, res.Receipt)
		}
		for range 4 {
			r := billed[rng.IntN(len(billed))]
			a := journal.Amount(1 + rng.Int64N(int64(r.Cost.Own)))
			if _, err := te.eng.Refund(ctx, gateway.RefundInput{Receipt: r.ID, Amount: &a, Reason: "test"}); err != nil && holon.ErrorCode(err) != holon.CodeRefundTooLarge {
				t.Fatalf("refund %s of %s: %v", a, r.ID, err)
			}
		}
		clock.Advance(24 * time.Hour)
	}
	want := bruteRecompute(t, te, keys)
	end := holon.DayOf(clock.Now())
	ranges := [][2]holon.Day{{start, end}, {start + 1, end - 2}, {start + 2, start + 2}, {start - 30, start - 1}, {end + 1, end + 9}}
	for _, payer := range []string{"alice", "acme"} {
		for _, by := range []string{"day", "mandate", "agent", "key"} {
			for _, rg := range ranges {
				rep, err := te.eng.SpendReport(payer, by, "", rg[0], rg[1])
				if err != nil {
					t.Fatal(err)
				}
				var exp []string
				if by == "day" {
					exp = bruteRows(want.spend[payer+" "+by], rg[0], rg[1], true)
				} else if rg[0] <= start && rg[1] >= end {
					exp = bruteRows(want.spend[payer+" "+by], 0, 0, false)
				} else {
					continue // a by other than day over part of the range: checked below, day by day
				}
				if got := reportRows(rep); !slices.Equal(got, exp) {
					t.Errorf("%s by %s from %s to %s:\n got %v\nwant %v", payer, by, rg[0], rg[1], got, exp)
				}
			}
		}
	}
	// By mandate over one day equals by day narrowed to that mandate.
	for d := start; d <= end; d++ {
		byM, err := te.eng.SpendReport("alice", "mandate", "", d, d)
		if err != nil {
			t.Fatal(err)
		}
		one, err := te.eng.SpendReport("alice", "day", "alice/refunds", d, d)
		if err != nil {
			t.Fatal(err)
		}
		day := bruteRows(want.spend["alice day"], d, d, true)
		if len(day) > 0 && (len(byM.Rows) != 1 || len(one.Rows) != 1 || byM.Rows[0].Tally != one.Rows[0].Tally) {
			t.Errorf("day %s: by mandate %v, narrowed %v, by day %v", d, reportRows(byM), reportRows(one), day)
		}
	}
	for _, author := range []string{"lena", "acme", "bob"} {
		for _, rg := range ranges {
			rep, err := te.eng.EarningsReport(author, "day", rg[0], rg[1])
			if err != nil {
				t.Fatal(err)
			}
			exp := bruteRows(want.earnings[author], rg[0], rg[1], true)
			if got := reportRows(rep); !slices.Equal(got, exp) {
				t.Errorf("earnings of %s by day from %s to %s:\n got %v\nwant %v", author, rg[0], rg[1], got, exp)
			}
		}
		// By version over every day adds up to the versions' counters.
		rep, err := te.eng.EarningsReport(author, "version", start, end)
		if err != nil {
			t.Fatal(err)
		}
		for _, row := range rep.Rows {
			e := te.earned(t, row.Group)
			if row.Currency == "EUR" && row.Net() != e.Own+e.Royalties {
				t.Errorf("%s: report nets %s, its earnings counters %s", row.Group, row.Net(), e.Own+e.Royalties)
			}
		}
	}
	for _, bad := range []struct{ by string }{{"week"}, {""}} {
		if _, err := te.eng.SpendReport("alice", bad.by, "", start, end); holon.ErrorCode(err) != holon.CodeInvalidReport {
			t.Errorf("by %q: %v, want %s", bad.by, err, holon.CodeInvalidReport)
		}
	}
	if _, err := te.eng.SpendReport("alice", "day", "", end, start); holon.ErrorCode(err) != holon.CodeInvalidReport {
		t.Errorf("to before from: %v", err)
	}
	if _, err := te.eng.SpendReport("alice", "day", "", start, start+gateway.MaxReportDays); holon.ErrorCode(err) != holon.CodeInvalidReport {
		t.Errorf("a range past the limit: %v", err)
	}
}
