package journal

import (
	"errors"
	"fmt"
	"math/bits"
)

// Refunds reverse a paid call's split in proportion, by the micro-unit.
//
// A split of a price C into shares s_1 … s_n (sum C) is seen as C
// micro-units in one fixed order: the k-th micro-unit of share i sits at
// position (k − ½)/s_i, the middle of its k-th s_i-th of the way, and
// micro-units at the same position come in the order of the shares.
// Refunds take micro-units back from the front of that order: once R of
// the price is refunded in all, share i has given back the micro-units
// among the first R, that is R × s_i / C of them rounded to the nearest
// (within ½ + n/2 × s_i/C micro-units: the Sainte-Laguë rounding). So
//
//   - a refund of the whole price returns every share exactly;
//   - refunds in several parts move, together, exactly what one refund of
//     their sum moves: the order is fixed, so nothing rounds twice;
//   - no share ever gives back more than it received, nor a negative
//     amount: each micro-unit refunded is one of a share's own.
//
// RefundTaken gives the cumulative amounts; a refund's lines are the
// difference between the amounts after it and before it.

// RefundTaken is what each share has given back once refunded of the
// price (the shares' sum) is refunded in all: out[i] for shares[i].
func RefundTaken(shares []Share, refunded Amount) ([]Amount, error) {
	var total Amount
	for i, s := range shares {
		if s.Amount < 0 {
			return nil, fmt.Errorf("refund: share %d (%s) is negative", i, s.To)
		}
		var err error
		if total, err = total.Add(s.Amount); err != nil {
			return nil, fmt.Errorf("refund: shares: %w", err)
		}
	}
	if total > maxRefundable {
		return nil, fmt.Errorf("refund: a price of %s is above what a refund divides, %s", total, maxRefundable)
	}
	if refunded < 0 || refunded > total {
		return nil, fmt.Errorf("refund %s of a price of %s: want 0 to the price", refunded, total)
	}
	out := make([]Amount, len(shares))
	if refunded == 0 {
		return out, nil
	}
	if refunded == total {
		for i, s := range shares {
			out[i] = s.Amount
		}
		return out, nil
	}
	// t is the position of the refunded-th micro-unit: the smallest
	// position (2k − 1)/(2 s_i) at which at least refunded micro-units sit.
	var t position
	found := false
	for _, s := range shares {
		if s.Amount == 0 {
			continue
		}
		pos := func(k int64) position { return position{p: uint64(2*k - 1), q: 2 * uint64(s.Amount)} }
		lo, hi := int64(1), int64(s.Amount)
		for lo < hi {
			mid := lo + (hi-lo)/2
			if countAt(shares, pos(mid)) >= int64(refunded) {
				hi = mid
			} else {
				lo = mid + 1
			}
		}
		if c := pos(lo); countAt(shares, c) >= int64(refunded) && (!found || c.less(t)) {
			t, found = c, true
		}
	}
	// Every micro-unit before t, then those at t in the shares' order.
	var given int64
	for i, s := range shares {
		n, _ := units(s.Amount, t)
		out[i] = Amount(n)
		given += n
	}
	for i, s := range shares {
		if given == int64(refunded) {
			break
		}
		if _, at := units(s.Amount, t); at {
			out[i]++
			given++
		}
	}
	return out, nil
}

// maxRefundable bounds the price a refund divides, so that positions
// stay exact in 128 bits (2.3 trillion units of a currency).
const maxRefundable = Amount(1 << 61)

// position is a place on the way through a split, p/q (0 < p/q ≤ 1, q at
// most twice MaxAmount): its arithmetic is exact in 128 bits.
type position struct{ p, q uint64 }

// less reports whether a comes before b: a.p × b.q < b.p × a.q.
func (a position) less(b position) bool {
	h1, l1 := bits.Mul64(a.p, b.q)
	h2, l2 := bits.Mul64(b.p, a.q)
	return h1 < h2 || (h1 == h2 && l1 < l2)
}

// countAt is how many micro-units sit at position t or before.
func countAt(shares []Share, t position) int64 {
	var n int64
	for _, s := range shares {
		below, at := units(s.Amount, t)
		n += below
		if at {
			n++
		}
	}
	return n
}

// units counts a share's micro-units (of s) before position t, and
// reports whether one sits exactly at t: the k ≥ 1 with (2k − 1)/(2s) < t,
// that is k < (2ts + 1)/2 = (2ps + q)/(2q) for t = p/q.
func units(s Amount, t position) (below int64, at bool) {
	if s <= 0 {
		return 0, false
	}
	hi, lo := bits.Mul64(2*t.p, uint64(s))
	lo, carry := bits.Add64(lo, t.q, 0)
	hi += carry
	// The quotient is about t × s ≤ s: it fits in 64 bits.
	q, r := bits.Div64(hi, lo, 2*t.q)
	n := int64(q)
	if r == 0 {
		// k = n sits exactly at t: before it are n − 1.
		return min(n-1, int64(s)), n >= 1 && n <= int64(s)
	}
	return min(n, int64(s)), false
}

// ErrRefundMovesNothing is a refund whose every micro-unit comes from the
// payer's own shares (royalties it paid itself): it would move no money.
// A larger refund, or one after it, takes from the other shares too.
var ErrRefundMovesNothing = errors.New("every micro-unit of it is the payer's own share: it moves no money")

// Refund journals one refund of a paid call: its payer receives amount
// back, and each share of the call's split gives back its part, the
// micro-units between refunded before and after this refund (see
// RefundTaken). before is what earlier refunds of the same call returned.
// It returns the entry and each share's part; ErrRefundMovesNothing
// (with the parts) when every part is the payer's own.
func Refund(key, payer string, shares []Share, before, amount Amount) (Entry, []Amount, error) {
	if amount <= 0 {
		return Entry{}, nil, fmt.Errorf("refund %s: want more than 0", amount)
	}
	after, err := before.Add(amount)
	if err != nil {
		return Entry{}, nil, err
	}
	was, err := RefundTaken(shares, before)
	if err != nil {
		return Entry{}, nil, err
	}
	now, err := RefundTaken(shares, after)
	if err != nil {
		return Entry{}, nil, err
	}
	parts := make([]Amount, len(shares))
	lines := []Line{{Account: payer, Amount: amount}}
	for i, s := range shares {
		parts[i] = now[i] - was[i]
		if parts[i] == 0 {
			continue
		}
		if j := lineOf(lines, s.To); j >= 0 {
			lines[j].Amount -= parts[i]
		} else {
			lines = append(lines, Line{Account: s.To, Amount: -parts[i]})
		}
	}
	e := Entry{Key: key, Lines: dropZeroLines(lines)}
	if len(e.Lines) == 0 {
		return Entry{}, parts, fmt.Errorf("refund %s of %s: %w", key, amount, ErrRefundMovesNothing)
	}
	if err := e.Validate(); err != nil {
		return Entry{}, nil, fmt.Errorf("refund %s: %w", key, err)
	}
	return e, parts, nil
}
