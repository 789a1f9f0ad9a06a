package journal_test

import (
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
		chain = append(chain, journal.Upstream{Account: accounts[rng.IntN(len(accounts))], Rate: journal.Rate(rng.Int64N(journal.Micro + 1))})
	}
	return cost, creator, chain
}

// Ensure that refunds reverse a split exactly: over random prices, unit
// counts, exchange rates and royalty chains, a full refund (in one part
// or in many) returns every account to where it was; every partial refund
// moves exactly its amount, from shares that never give back more than
// they received nor less than nothing, as the same cumulative refund made
// at once would; and every entry sums to zero.
func TestRefund_Property(t *testing.T) {
	rng := rand.New(rand.NewPCG(24, 2026))
	for n := range 3000 {
		charge, creator, chain := randomCall(rng)
		shares, err := journal.Split(charge, creator, chain)
		if err != nil {
			t.Fatal(err)
		}
		settle, err := journal.Settlement(fmt.Sprintf("settle:r%d", n), "payer", shares)
		if err != nil {
			t.Fatal(err)
		}
		balances := map[string]journal.Amount{}
		for _, l := range settle.Lines {
			balances[l.Account] += l.Amount
		}
		// Refunds in random parts until the whole charge is back.
		var refunded journal.Amount
		given := make([]journal.Amount, len(shares))
		for part := 0; refunded < charge; part++ {
			amount := journal.Amount(1 + rng.Int64N(int64(charge-refunded)))
			if rng.IntN(4) == 0 {
				amount = charge - refunded // the rest
			}
			e, parts, err := journal.Refund(fmt.Sprintf("refund:r%d:%d", n, part+1), "payer", shares, refunded, amount)
			if err != nil {
				if len(shares) == 1 && shares[0].To == "payer" {
					break
				}
				t.Fatalf("call %d (%s over %v), refund %s after %s: %v", n, charge, shares, amount, refunded, err)
			}
			if err := e.Validate(); err != nil {
				t.Fatalf("call %d: %v", n, err)
			}
			var sum journal.Amount
			for i, p := range parts {
				if p < 0 {
					t.Fatalf("call %d: share %d gives back %s", n, i, p)
				}
				given[i] += p
				if given[i] > shares[i].Amount {
					t.Fatalf("call %d: share %d (%s) gave back %s of its %s", n, i, shares[i].To, given[i], shares[i].Amount)
				}
				sum += p
			}
			if sum != amount {
				t.Fatalf("call %d: the shares give back %s for a refund of %s", n, sum, amount)
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
