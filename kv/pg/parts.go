package pg

import (
	"bytes"
	"encoding/json"
	"strconv"

	"github.com/jackc/pgx/v5"

	"holon.dev/holon"
	"holon.dev/holon/journal"
)

// Earnings and latency in parts. As accounts, records and counters
// (migrations 24 and 25), a version's earnings and latency documents are
// kept in one part per gateway: part 0 under the version's ref, the
// gateway extending chain N > 0 under the ref, a space and N (PartKey),
// which sorts right after the ref and before any other key it begins (a
// ref holds no space). A gateway adds what only raises them to its own
// part; a refund, which lowers earnings, goes to part 0, judged on the
// sum. What a version has is the sum of its parts.

// PartKey is the key of part n of a version's earnings or latency.
func PartKey(ref string, n int) []byte {
	if n == 0 {
		return []byte(ref)
	}
	return strconv.AppendInt(append([]byte(ref), ' '), int64(n), 10)
}

// PartRef is the version a part's key belongs to.
func PartRef(key []byte) string {
	if i := bytes.IndexByte(key, ' '); i >= 0 {
		return string(key[:i])
	}
	return string(key)
}

// partsOf reads every part of a version's document in bucket (the
// writer's pending writes are sent before it reads), and the key of the
// first.
func (t *Tx) partsOf(bucket, ref string) (first []byte, parts [][]byte, err error) {
	err = t.all(`SELECT key_bytes, coalesce(convert_to(doc::text, 'UTF8'), raw) FROM app_docs
		WHERE bucket = $1 AND key_bytes >= $2 AND key_bytes < $3 ORDER BY key_bytes`,
		[]any{bucket, []byte(ref), []byte(ref + "!")}, func(rows pgx.Rows) error {
			var k, v []byte
			err := rows.Scan(&k, &v)
			if first == nil {
				first = k
			}
			parts = append(parts, v)
			return err
		})
	return first, parts, err
}

// signed is an amount of a part's document: part 0's may be below zero
// (a refund taken off it, the sum staying at zero or more), which a
// journal.Amount does not read.
type signed journal.Amount

func (a *signed) UnmarshalText(b []byte) error {
	neg := len(b) > 0 && b[0] == '-'
	if neg {
		b = b[1:]
	}
	x, err := journal.ParseAmount(string(b))
	if neg {
		x = -x
	}
	*a = signed(x)
	return err
}

// decodeEarningsPart decodes a part of a version's earnings.
func decodeEarningsPart(b []byte) (holon.Earnings, error) {
	var parts map[string]struct {
		PaidCalls int64  `json:"paid_calls"`
		Own       signed `json:"own"`
		Royalties signed `json:"royalties"`
	}
	if err := json.Unmarshal(b, &parts); err != nil {
		return nil, err
	}
	e := make(holon.Earnings, len(parts))
	for cur, x := range parts {
		e[cur] = holon.Earned{PaidCalls: x.PaidCalls, Own: journal.Amount(x.Own), Royalties: journal.Amount(x.Royalties)}
	}
	return e, nil
}

// SumEarnings adds the parts of a version's earnings.
func SumEarnings(parts [][]byte) (holon.Earnings, error) {
	sum := holon.Earnings{}
	for _, b := range parts {
		e, err := decodeEarningsPart(b)
		if err != nil {
			return nil, err
		}
		for cur, x := range e {
			y := sum[cur]
			y.PaidCalls += x.PaidCalls
			y.Own += x.Own
			y.Royalties += x.Royalties
			sum[cur] = y
		}
	}
	return sum, nil
}

// SumLatency adds the parts of a version's latency histogram.
func SumLatency(parts [][]byte) (holon.Latency, error) {
	var sum holon.Latency
	for _, b := range parts {
		var l holon.Latency
		if err := json.Unmarshal(b, &l); err != nil {
			return sum, err
		}
		if len(sum.Counts) < len(l.Counts) {
			sum.Counts = append(sum.Counts, make([]int64, len(l.Counts)-len(sum.Counts))...)
		}
		for i, c := range l.Counts {
			sum.Counts[i] += c
		}
	}
	return sum, nil
}

// Parts gathers the documents of a bucket kept in parts, met in key order
// (a version's parts together), and hands each version's over to its
// function: the ref, the key of its first part, and the parts.
type Parts struct {
	fn    func(ref string, first []byte, parts [][]byte) error
	ref   string
	first []byte
	parts [][]byte
}

// NewParts gathers parts for fn.
func NewParts(fn func(ref string, first []byte, parts [][]byte) error) *Parts {
	return &Parts{fn: fn}
}

// Add takes the next document, under key k; it hands the version before
// over once k is another version's.
func (p *Parts) Add(k, v []byte) error {
	if r := PartRef(k); r != p.ref || p.parts == nil {
		if err := p.Flush(); err != nil {
			return err
		}
		p.ref, p.first = r, bytes.Clone(k)
	}
	p.parts = append(p.parts, bytes.Clone(v))
	return nil
}

// Flush hands the version gathered over, if any.
func (p *Parts) Flush() error {
	if p.parts == nil {
		return nil
	}
	parts := p.parts
	p.parts = nil
	return p.fn(p.ref, p.first, parts)
}

// walkParts calls fn with the parts of each version in bucket whose ref
// starts with prefix, in order.
func (t *Tx) walkParts(bucket, prefix string, fn func(ref string, parts [][]byte) error) error {
	p := []byte(prefix)
	g := NewParts(func(ref string, _ []byte, parts [][]byte) error { return fn(ref, parts) })
	err := t.walk(bucket, p, func(k, v []byte) (bool, error) {
		if !bytes.HasPrefix(k, p) {
			return false, nil
		}
		return true, g.Add(k, v)
	})
	if err != nil {
		return err
	}
	return g.Flush()
}
