package gateway

import (
	"math/big"
	"math/rand/v2"
	"testing"
)

// Ensure that compareRat agrees with big.Rat.Cmp, for fractions whose
// parts fit in 64 bits and for larger ones.
func TestCompareRat(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	rat := func() *big.Rat {
		switch rng.IntN(4) {
		case 0: // an integer: a worst case with a perfect record
			return new(big.Rat).SetInt64(rng.Int64N(1000))
		case 1: // above 64 bits
			n := new(big.Int).Lsh(big.NewInt(rng.Int64N(1000)+1), 70)
			return new(big.Rat).SetFrac(n, big.NewInt(rng.Int64N(7)+1))
		default:
			return new(big.Rat).SetFrac(big.NewInt(rng.Int64()), big.NewInt(rng.Int64N(1<<62)+1))
		}
	}
	for range 20000 {
		a, b := rat(), rat()
		if rng.IntN(10) == 0 {
			b = new(big.Rat).Set(a)
		}
		if got, want := compareRat(a, b), a.Cmp(b); got != want {
			t.Fatalf("compareRat(%s, %s) = %d, want %d", a, b, got, want)
		}
	}
}
