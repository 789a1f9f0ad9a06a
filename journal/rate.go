package journal

import (
	"errors"
	"math"
	"math/bits"
)

// Rate is a non-negative multiplier in millionths: an exchange rate (one unit
// of a foreign currency is worth Rate units of the mandate's currency), a
// royalty share or the platform fee. "0.92" is Rate(920000).
type Rate int64

// One is the rate 1: a conversion that changes nothing.
const One = Rate(Micro)

// PlatformFee is the platform's share of every paid call: 10 %.
const PlatformFee = Rate(100_000)

// ParseRate reads a rate written as a decimal string with at most six
// decimals, no sign and no exponent ("0.92", "0.15", "1").
func ParseRate(s string) (Rate, error) {
	v, err := parseDecimal(s)
	if err != nil {
		return 0, err
	}
	return Rate(v), nil
}

// MustParseRate is ParseRate for constants; it panics on an invalid string.
func MustParseRate(s string) Rate {
	r, err := ParseRate(s)
	if err != nil {
		panic(err)
	}
	return r
}

// String formats the rate like an amount ("0.92", "0.15", "1.00").
func (r Rate) String() string { return formatDecimal(int64(r)) }

// MarshalText writes the rate as a decimal string.
func (r Rate) MarshalText() ([]byte, error) { return []byte(r.String()), nil }

// UnmarshalText reads a decimal string with ParseRate.
func (r *Rate) UnmarshalText(b []byte) error {
	v, err := ParseRate(string(b))
	if err != nil {
		return err
	}
	*r = v
	return nil
}

// ConvertUp converts an amount at a rate, rounding up to the next
// micro-unit: ceil(a × r). It is the rule for fx (mandate.md §2): the payer
// never pays less than the price.
func ConvertUp(a Amount, r Rate) (Amount, error) {
	return mulRate(a, r, true)
}

// MulFloor returns floor(a × r): the platform fee and each royalty level.
func MulFloor(a Amount, r Rate) (Amount, error) {
	return mulRate(a, r, false)
}

func mulRate(a Amount, r Rate, up bool) (Amount, error) {
	if a < 0 || r < 0 {
		return 0, errors.New("multiply: negative operand")
	}
	hi, lo := bits.Mul64(uint64(a), uint64(r))
	if hi >= Micro {
		return 0, ErrOverflow
	}
	q, rem := bits.Div64(hi, lo, Micro)
	if q > math.MaxInt64 {
		return 0, ErrOverflow
	}
	if up && rem != 0 {
		// Checked before the increment: q may be MaxUint64, which q++ would wrap to 0.
		if q == math.MaxInt64 {
			return 0, ErrOverflow
		}
		q++
	}
	return Amount(q), nil
}

// ConvertBackDown expresses an amount of the mandate's currency in the
// foreign currency of rate r, rounded down: floor(a / r). A caller's
// ceiling handed to an agent in its own currency never grows in conversion.
func ConvertBackDown(a Amount, r Rate) (Amount, error) {
	if a < 0 || r <= 0 {
		return 0, errors.New("convert back: negative amount or non-positive rate")
	}
	hi, lo := bits.Mul64(uint64(a), Micro)
	if hi >= uint64(r) {
		return 0, ErrOverflow
	}
	q, _ := bits.Div64(hi, lo, uint64(r))
	if q > math.MaxInt64 {
		return 0, ErrOverflow
	}
	return Amount(q), nil
}
