// Package journal is Holon's money: the amount type in integer micro-units,
// decimal strings on the wire, exchange rates rounded up, the split of a
// paid call between the platform, the creator and the royalty chain, and
// journal entries whose lines sum to zero. It does no I/O.
package journal

import (
	"errors"
	"fmt"
	"math"
	"math/bits"
	"strconv"
	"strings"
)

// Micro is the number of micro-units in one unit of a currency.
const Micro = 1_000_000

// MaxDecimals is the largest number of decimals an amount may have on the wire.
const MaxDecimals = 6

// Amount is a sum of money in integer micro-units of some currency.
// Amounts on the wire are non-negative; journal lines may be negative.
type Amount int64

// ErrOverflow is returned when an operation would leave the range of an Amount.
var ErrOverflow = errors.New("amount out of range")

// MaxAmount is the largest representable amount (about 9.2 trillion units).
const MaxAmount = Amount(math.MaxInt64)

// ParseAmount reads a decimal string as written in manifests, mandates and on
// the wire: digits, optionally a dot and one to six decimals; no sign, no
// exponent, no spaces. "0.10", "3" and "0.004725" are valid.
func ParseAmount(s string) (Amount, error) {
	v, err := parseDecimal(s)
	if err != nil {
		return 0, err
	}
	return Amount(v), nil
}

// MustParseAmount is ParseAmount for constants in code and tests; it panics
// on an invalid string.
func MustParseAmount(s string) Amount {
	a, err := ParseAmount(s)
	if err != nil {
		panic(err)
	}
	return a
}

// parseDecimal turns a non-negative decimal string with at most six decimals
// into millionths, refusing anything that would overflow an int64.
func parseDecimal(s string) (int64, error) {
	if s == "" {
		return 0, errors.New("empty: want a decimal string such as \"0.10\"")
	}
	intPart, frac, hasDot := strings.Cut(s, ".")
	if intPart == "" {
		return 0, fmt.Errorf("%q: want a digit before the decimal point", s)
	}
	if hasDot && frac == "" {
		return 0, fmt.Errorf("%q: want a digit after the decimal point", s)
	}
	if len(frac) > MaxDecimals {
		return 0, fmt.Errorf("%q: at most %d decimals", s, MaxDecimals)
	}
	for _, part := range []string{intPart, frac} {
		for i := 0; i < len(part); i++ {
			if c := part[i]; c < '0' || c > '9' {
				return 0, fmt.Errorf("%q: only digits and one decimal point (no sign, exponent or spaces)", s)
			}
		}
	}
	var v int64
	for i := 0; i < len(intPart); i++ {
		d := int64(intPart[i] - '0')
		if v > (math.MaxInt64-d)/10 {
			return 0, errTooLarge(s)
		}
		v = v*10 + d
	}
	if v > math.MaxInt64/Micro {
		return 0, errTooLarge(s)
	}
	v *= Micro
	var f int64
	if frac != "" {
		f, _ = strconv.ParseInt(frac+strings.Repeat("0", MaxDecimals-len(frac)), 10, 64)
	}
	if v > math.MaxInt64-f {
		return 0, errTooLarge(s)
	}
	return v + f, nil
}

// errTooLarge says that s is above the largest amount, and what that is.
func errTooLarge(s string) error {
	return fmt.Errorf("%q: %w: at most %s", s, ErrOverflow, formatDecimal(math.MaxInt64))
}

// formatDecimal writes millionths in the canonical form: at least two
// decimals, trailing zeros beyond the second removed.
func formatDecimal(v int64) string {
	var buf [32]byte
	return string(appendDecimal(buf[:0], v))
}

// appendDecimal appends formatDecimal(v) to b without allocating: amounts
// are formatted for every record the store writes.
func appendDecimal(b []byte, v int64) []byte {
	u := uint64(v)
	if v < 0 {
		b = append(b, '-')
		u = -u
	}
	ip, fp := u/Micro, u%Micro
	b = strconv.AppendUint(b, ip, 10)
	b = append(b, '.')
	// Six digits of fraction, then drop trailing zeros beyond the second.
	var frac [MaxDecimals]byte
	for i := MaxDecimals - 1; i >= 0; i-- {
		frac[i] = byte('0' + fp%10)
		fp /= 10
	}
	n := MaxDecimals
	for n > 2 && frac[n-1] == '0' {
		n--
	}
	return append(b, frac[:n]...)
}

// String formats the amount in Holon's canonical decimal form: at least two
// decimals and at most six, with trailing zeros beyond the second removed
// ("0.10", "3.00", "0.004725", "-0.035"). An input of "0.10" reads back as
// "0.10"; "0.100" and "0.1" read back as "0.10" too.
func (a Amount) String() string { return formatDecimal(int64(a)) }

// Micros returns the amount as a plain count of micro-units.
func (a Amount) Micros() int64 { return int64(a) }

// Add returns a+b, or ErrOverflow.
func (a Amount) Add(b Amount) (Amount, error) {
	s, overflow := addInt64(int64(a), int64(b))
	if overflow {
		return 0, ErrOverflow
	}
	return Amount(s), nil
}

// Sub returns a-b, or ErrOverflow.
func (a Amount) Sub(b Amount) (Amount, error) {
	d := a - b
	if (b > 0 && d > a) || (b < 0 && d < a) {
		return 0, ErrOverflow
	}
	return d, nil
}

// MulInt returns a×n for a non-negative count n (units of a per-unit price),
// or ErrOverflow.
func (a Amount) MulInt(n int64) (Amount, error) {
	if n < 0 || a < 0 {
		return 0, errors.New("multiply: negative operand")
	}
	hi, lo := bits.Mul64(uint64(a), uint64(n))
	if hi != 0 || lo > math.MaxInt64 {
		return 0, ErrOverflow
	}
	return Amount(lo), nil
}

// Min returns the smaller of a and b.
func Min(a, b Amount) Amount {
	if a < b {
		return a
	}
	return b
}

// Sum adds amounts, or returns ErrOverflow.
func Sum(as ...Amount) (Amount, error) {
	var t Amount
	for _, a := range as {
		var err error
		if t, err = t.Add(a); err != nil {
			return 0, err
		}
	}
	return t, nil
}

func addInt64(a, b int64) (int64, bool) {
	s := a + b
	return s, (a > 0 && b > 0 && s < 0) || (a < 0 && b < 0 && s >= 0)
}

// MarshalText writes the canonical decimal string, so an amount is a JSON string.
func (a Amount) MarshalText() ([]byte, error) {
	return appendDecimal(make([]byte, 0, 24), int64(a)), nil
}

// AppendText appends the canonical decimal string to b (encoding.TextAppender).
func (a Amount) AppendText(b []byte) ([]byte, error) { return appendDecimal(b, int64(a)), nil }

// UnmarshalText reads a decimal string with ParseAmount. In JSON an amount
// must be a string: a bare number is refused by encoding/json.
func (a *Amount) UnmarshalText(b []byte) error {
	v, err := ParseAmount(string(b))
	if err != nil {
		return err
	}
	*a = v
	return nil
}
