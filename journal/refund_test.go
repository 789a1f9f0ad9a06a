package journal_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"

	"holon.dev/holon/journal"
)

// randomCall is a paid call drawn at random: a per-unit price in a
// foreign currency, a number of units, an exchange rate into the payer's
// currency, and a royalty chain of up to MaxChain levels whose accounts
// may repeat.
func randomCall(rng *rand.Rand) (charge journal.Amount, creator string, chain []journal.Upstream) {
	price := journal.Amount(1 + rng.Int64N(5_000_000)) // up to 5.00 a unit
	units := 1 + rng.Int64N(40)
	rate := journal.Rate(1 + rng.Int64N(3*journal.Micro)) // 0.000001 to 3
	if rng.IntN(3) == 0 {
		rate = journal.One // the payer's own currency
	}
	cost, err := journal.ConvertUp(price*journal.Amount(units), rate)
	if err != nil {
		panic(err)
	}
	if rng.IntN(10) == 0 {
		cost = journal.Amount(1 + rng.Int64N(20)) // a handful of micro-units
	}
	accounts := []string{"ann", "bob", "cy", "dee", "holon"}
	creator = accounts[rng.IntN(len(accounts)-1)]
	for range rng.IntN(journal.MaxChain + 1) {
		up := accounts[rng.IntN(len(accounts))]
		if rng.IntN(12) == 0 {
			up = "payer" // a payer paid royalties on its own call
		}
		chain = append(chain, journal.Upstream{Account: up, Rate: journal.Rate(rng.Int64N(journal.Micro + 1))})
	}
	return cost, creator, chain
}

// Ensure that refunds reverse a split exactly: over random prices, unit
// counts, exchange rates (a price in the agent's currency converted into
// the payer's, rounded up, as billing does) and royalty chains (up to
// MaxChain levels, accounts repeating, the payer among them now and then),
// split by level as the engine refunds them or merged as a receipt shows
// them, a full refund (in one part or in many) returns every account to
// where it was; every partial refund moves exactly its amount, from shares
// that never give back more than they received nor less than nothing, as
// the same cumulative refund made at once would; every micro-unit it moves
// is traced: each line of its entry is the payer's amount less its own
// parts, or an account's parts of the shares that paid it (a refund that
// would come all from the payer's own shares is refused, moving nothing:
// ErrRefundMovesNothing), no account
// the settle entry did not pay gives anything back, and none gives back,
// over all the refunds, more than the settle entry paid it; and every
// entry sums to zero.
func TestRefund_Property(t *testing.T) {
	rng := rand.New(rand.NewPCG(24, 2026))
	var levelled, merged, partial, movedNothing int
	for n := range 3000 {
		charge, creator, chain := randomCall(rng)
		var shares []journal.Share
		var err error
		if n%2 == 0 {
			// By level, zero levels kept: what the engine refunds.
			shares, err = journal.SplitLevels(charge, creator, chain)
			levelled++
		} else {
			shares, err = journal.Split(charge, creator, chain)
			merged++
		}
		if err != nil {
			t.Fatal(err)
		}
		settle, err := journal.Settlement(fmt.Sprintf("settle:r%d", n), "payer", shares)
		if errors.Is(err, journal.ErrTooFewLines) {
			continue // the payer paid itself: nothing moved, nothing to give back
		}
		if err != nil {
			t.Fatal(err)
		}
		balances := map[string]journal.Amount{}
		paid := map[string]journal.Amount{} // what the settle entry credited each account
		for _, l := range settle.Lines {
			balances[l.Account] += l.Amount
			if l.Amount > 0 {
				paid[l.Account] += l.Amount
			}
		}
		back := map[string]journal.Amount{} // what each account gave back so far
		// Refunds in random parts until the whole charge is back.
		var refunded journal.Amount
		given := make([]journal.Amount, len(shares))
		for part := 0; refunded < charge; part++ {
			amount := journal.Amount(1 + rng.Int64N(int64(charge-refunded)))
			if rng.IntN(4) == 0 {
				amount = charge - refunded // the rest
			}
			if amount < charge-refunded {
				partial++
			}
			e, parts, err := journal.Refund(fmt.Sprintf("refund:r%d:%d", n, part+1), "payer", shares, refunded, amount)
			if errors.Is(err, journal.ErrRefundMovesNothing) {
				// Only when every part is the payer's own share.
				for i, p := range parts {
					if p != 0 && shares[i].To != "payer" {
						t.Fatalf("call %d (%s over %v), refund %s after %s: %v, but share %d (%s) gives back %s", n, charge, shares, amount, refunded, err, i, shares[i].To, p)
					}
				}
				movedNothing++
				if amount == charge-refunded {
					break // the rest is the payer's own: every account is where it was already
				}
				continue
			}
			if err != nil {
				t.Fatalf("call %d (%s over %v), refund %s after %s: %v", n, charge, shares, amount, refunded, err)
			}
			if err := e.Validate(); err != nil {
				t.Fatalf("call %d: %v", n, err)
			}
			var sum journal.Amount
			traced := map[string]journal.Amount{"payer": amount}
			for i, p := range parts {
				if p < 0 {
					t.Fatalf("call %d: share %d gives back %s", n, i, p)
				}
				given[i] += p
				if given[i] > shares[i].Amount {
					t.Fatalf("call %d: share %d (%s) gave back %s of its %s", n, i, shares[i].To, given[i], shares[i].Amount)
				}
				sum += p
				traced[shares[i].To] -= p
			}
			if sum != amount {
				t.Fatalf("call %d: the shares give back %s for a refund of %s", n, sum, amount)
			}
			// Every line is traced to the shares' parts, and nothing else moves.
			lines := map[string]journal.Amount{}
			for _, l := range e.Lines {
				lines[l.Account] += l.Amount
			}
			for acct, a := range traced {
				if lines[acct] != a {
					t.Fatalf("call %d (%s over %v), refund %s after %s: %s moves %s, its shares' parts %s (entry %v, parts %v)",
						n, charge, shares, amount, refunded, acct, lines[acct], a, e.Lines, parts)
				}
			}
			for acct, a := range lines {
				if _, ok := traced[acct]; !ok {
					t.Fatalf("call %d: refund %s moves %s on %s, which no share holds", n, amount, a, acct)
				}
				if acct == "payer" {
					continue
				}
				if _, ok := paid[acct]; !ok {
					t.Fatalf("call %d: refund %s takes %s from %s, which the settle entry never paid", n, amount, -a, acct)
				}
				back[acct] -= a
				if back[acct] > paid[acct] {
					t.Fatalf("call %d: %s gave back %s in all, the settle entry paid it %s", n, acct, back[acct], paid[acct])
				}
			}
			refunded += amount
			// The same cumulative refund at once takes the same from each share.
			at, err := journal.RefundTaken(shares, refunded)
			if err != nil {
				t.Fatal(err)
			}
			for i := range shares {
				if at[i] != given[i] {
					t.Fatalf("call %d: after %s refunded in parts, share %d gave back %s; at once, %s", n, refunded, i, given[i], at[i])
				}
			}
			for _, l := range e.Lines {
				balances[l.Account] += l.Amount
			}
		}
		for account, b := range balances {
			if b != 0 {
				t.Fatalf("call %d (%s over %v): after a full refund %s is at %s, want where it was", n, charge, shares, account, b)
			}
		}
	}
	if levelled < 1000 || merged < 1000 || partial < 3000 || movedNothing == 0 {
		t.Errorf("%d calls split by level, %d merged, %d partial refunds, %d that would move nothing: too few to mean anything", levelled, merged, partial, movedNothing)
	}
}

// Ensure that a refund is in proportion to the split: the documented
// order takes back, for each share, R × s / C of it rounded to the
// nearest, within ½ + n/2 × s/C micro-units (n shares).
func TestRefundTaken_Proportional(t *testing.T) {
	shares := []journal.Share{{To: "holon", Amount: 3}, {To: "lena", Amount: 22}, {To: "acme", Amount: 10}}
	for _, tt := range []struct {
		refunded journal.Amount
		want     []journal.Amount
	}{
		{0, []journal.Amount{0, 0, 0}},
		{1, []journal.Amount{0, 1, 0}},    // lena's first micro-unit sits at 1/44, the earliest
		{7, []journal.Amount{1, 4, 2}},    // 1/6; 1/44 … 7/44; 1/20, 3/20
		{35, []journal.Amount{3, 22, 10}}, // all of it
	} {
		got, err := journal.RefundTaken(shares, tt.refunded)
		if err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(got) != fmt.Sprint(tt.want) {
			t.Errorf("RefundTaken(%s) = %v, want %v", tt.refunded, got, tt.want)
		}
	}
	for r := journal.Amount(0); r <= 35; r++ {
		got, _ := journal.RefundTaken(shares, r)
		for i, s := range shares {
			exact := float64(r) * float64(s.Amount) / 35
			bound := 0.5 + 1.5*float64(s.Amount)/35
			if d := float64(got[i]) - exact; d < -bound || d > bound {
				t.Errorf("refunded %s: share %d gives back %s, in proportion %.3f", r, i, got[i], exact)
			}
		}
	}
	if _, err := journal.RefundTaken(shares, 36); err == nil {
		t.Error("a refund above the price: no error")
	}
}
