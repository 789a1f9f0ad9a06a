package holon

import (
	"fmt"
	"strconv"
	"time"
	"unicode/utf8"

	"holon.dev/holon/journal"
)

// The records every call writes (receipts, holds, accounts, budgets,
// journal rows, call events, agent records) encode themselves by hand
// (AppendJSON) instead of by encoding/json's reflection, which took most
// of the store's writer's time. The bytes are exactly those json.Marshal
// writes (same field order, omitempty, escaping and time format; package
// kv's TestEncode_SameAsEncodingJSON holds them to it), so stored values,
// backups, the PostgreSQL loader and the API see no difference.

// AppendJSON appends the receipt's JSON encoding, the bytes json.Marshal
// writes.
func (r *Receipt) AppendJSON(b []byte) ([]byte, error) {
	var err error
	b = append(b, `{"id":`...)
	b = appendJSONString(b, r.ID)
	b = append(b, `,"parent":`...)
	b = appendOptString(b, r.Parent)
	b = append(b, `,"mandate":`...)
	b = appendJSONString(b, r.Mandate)
	b = append(b, `,"caller":`...)
	b = appendJSONString(b, r.Caller)
	b = append(b, `,"agent":`...)
	b = appendOptString(b, r.Agent)
	b = append(b, `,"status":`...)
	b = appendJSONString(b, r.Status)
	b = append(b, `,"error":`...)
	b = appendOptString(b, r.Error)
	b = append(b, `,"approval":`...)
	b = appendOptString(b, r.Approval)
	b = append(b, `,"worst_case":`...)
	if r.WorstCase == nil {
		b = append(b, "null"...)
	} else {
		b = appendAmount(b, *r.WorstCase)
	}
	b = append(b, `,"currency":`...)
	b = appendJSONString(b, r.Currency)
	b = append(b, `,"payer":`...)
	b = appendJSONString(b, r.Payer)
	b = append(b, `,"sub_mandate":`...)
	b = appendOptString(b, r.SubMandate)
	b = append(b, `,"billed":`...)
	b = strconv.AppendBool(b, r.Billed)
	b = append(b, `,"cost":{"own":`...)
	b = appendAmount(b, r.Cost.Own)
	b = append(b, `,"downstream":`...)
	b = appendAmount(b, r.Cost.Downstream)
	b = append(b, `,"total":`...)
	b = appendAmount(b, r.Cost.Total)
	b = append(b, `},"splits":`...)
	b = appendShares(b, r.Splits)
	b = append(b, `,"children":`...)
	b = appendStrings(b, r.Children, false)
	b = append(b, `,"duration_ms":`...)
	b = strconv.AppendInt(b, r.DurationMS, 10)
	b = append(b, `,"created":`...)
	if b, err = appendTime(b, r.Created); err != nil {
		return nil, err
	}
	return append(b, '}'), nil
}

// AppendJSON appends the hold's JSON encoding, the bytes json.Marshal
// writes.
func (h *Hold) AppendJSON(b []byte) ([]byte, error) {
	var err error
	b = append(b, `{"receipt":`...)
	b = appendJSONString(b, h.Receipt)
	b = append(b, `,"payer":`...)
	b = appendJSONString(b, h.Payer)
	b = append(b, `,"amount":`...)
	b = appendAmount(b, h.Amount)
	b = append(b, `,"mandate":`...)
	b = appendJSONString(b, h.Mandate)
	b = append(b, `,"reserved":`...)
	b = appendAmount(b, h.Reserved)
	if h.Window != "" {
		b = append(b, `,"window":`...)
		b = appendJSONString(b, h.Window)
	}
	if h.Funder != "" {
		b = append(b, `,"funder":`...)
		b = appendJSONString(b, h.Funder)
	}
	if h.Parent != "" {
		b = append(b, `,"parent":`...)
		b = appendJSONString(b, h.Parent)
	}
	if len(h.Children) > 0 {
		b = append(b, `,"children":`...)
		b = appendStrings(b, h.Children, false)
	}
	b = append(b, `,"downstream":`...)
	b = appendAmount(b, h.Downstream)
	if h.SubMandate != "" {
		b = append(b, `,"sub_mandate":`...)
		b = appendJSONString(b, h.SubMandate)
	}
	b = append(b, `,"started":`...)
	if b, err = appendTime(b, h.Started); err != nil {
		return nil, err
	}
	return append(b, '}'), nil
}

// AppendJSON appends the account's JSON encoding, the bytes json.Marshal
// writes.
func (a Account) AppendJSON(b []byte) []byte {
	b = append(b, `{"balance":`...)
	b = appendAmount(b, a.Balance)
	b = append(b, `,"held":`...)
	b = appendAmount(b, a.Held)
	return append(b, '}')
}

// AppendJSON appends the budget's JSON encoding, the bytes json.Marshal
// writes.
func (bu Budget) AppendJSON(b []byte) []byte {
	b = append(b, `{"spent":`...)
	b = appendAmount(b, bu.Spent)
	b = append(b, `,"reserved":`...)
	b = appendAmount(b, bu.Reserved)
	return append(b, '}')
}

// AppendJSON appends the record's JSON encoding, the bytes json.Marshal
// writes.
func (r Record) AppendJSON(b []byte) []byte {
	b = append(b, `{"runs":`...)
	b = strconv.AppendInt(b, r.Runs, 10)
	b = append(b, `,"succeeded":`...)
	b = strconv.AppendInt(b, r.Succeeded, 10)
	b = append(b, `,"billed":`...)
	b = appendAmount(b, r.Billed)
	b = append(b, `,"duration_ms":`...)
	b = strconv.AppendInt(b, r.DurationMS, 10)
	return append(b, '}')
}

// AppendJSON appends the event's JSON encoding, the bytes json.Marshal
// writes.
func (ev *Event) AppendJSON(b []byte) ([]byte, error) {
	var err error
	b = append(b, `{"seq":`...)
	b = strconv.AppendUint(b, ev.Seq, 10)
	b = append(b, `,"receipt":`...)
	b = appendJSONString(b, ev.Receipt)
	b = append(b, `,"agent":`...)
	b = appendJSONString(b, ev.Agent)
	b = append(b, `,"status":`...)
	b = appendJSONString(b, ev.Status)
	if ev.Error != "" {
		b = append(b, `,"error":`...)
		b = appendJSONString(b, ev.Error)
	}
	b = append(b, `,"duration_ms":`...)
	b = strconv.AppendInt(b, ev.DurationMS, 10)
	b = append(b, `,"billed":`...)
	b = appendAmount(b, ev.Billed)
	b = append(b, `,"currency":`...)
	b = appendJSONString(b, ev.Currency)
	b = append(b, `,"delegated":`...)
	b = strconv.AppendBool(b, ev.Delegated)
	b = append(b, `,"time":`...)
	if b, err = appendTime(b, ev.Time); err != nil {
		return nil, err
	}
	return append(b, '}'), nil
}

// AppendJSON appends the row's JSON encoding, the bytes json.Marshal
// writes.
func (row *JournalRow) AppendJSON(b []byte) ([]byte, error) {
	var err error
	b = append(b, `{"seq":`...)
	b = strconv.AppendUint(b, row.Seq, 10)
	b = append(b, `,"key":`...)
	b = appendJSONString(b, row.Key)
	b = append(b, `,"time":`...)
	if b, err = appendTime(b, row.Time); err != nil {
		return nil, err
	}
	b = append(b, `,"lines":`...)
	if row.Lines == nil {
		b = append(b, "null"...)
	} else {
		b = append(b, '[')
		for i, l := range row.Lines {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, `{"account":`...)
			b = appendJSONString(b, l.Account)
			b = append(b, `,"amount":`...)
			b = appendAmount(b, l.Amount)
			b = append(b, '}')
		}
		b = append(b, ']')
	}
	b = append(b, `,"prev":`...)
	b = appendJSONString(b, row.Prev)
	b = append(b, `,"hash":`...)
	b = appendJSONString(b, row.Hash)
	return append(b, '}'), nil
}

func appendShares(b []byte, shares []journal.Share) []byte {
	if shares == nil {
		return append(b, "null"...)
	}
	b = append(b, '[')
	for i, s := range shares {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"to":`...)
		b = appendJSONString(b, s.To)
		b = append(b, `,"amount":`...)
		b = appendAmount(b, s.Amount)
		b = append(b, '}')
	}
	return append(b, ']')
}

// appendStrings writes a []string; a nil one is null (or [] when
// emptyAsArray, for omitempty fields that are never nil when written).
func appendStrings(b []byte, ss []string, emptyAsArray bool) []byte {
	if ss == nil && !emptyAsArray {
		return append(b, "null"...)
	}
	b = append(b, '[')
	for i, s := range ss {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendJSONString(b, s)
	}
	return append(b, ']')
}

func appendOptString(b []byte, s *string) []byte {
	if s == nil {
		return append(b, "null"...)
	}
	return appendJSONString(b, *s)
}

// appendAmount writes an amount as its canonical decimal string, as its
// MarshalText does.
func appendAmount(b []byte, a journal.Amount) []byte {
	b = append(b, '"')
	b, _ = a.AppendText(b)
	return append(b, '"')
}

// appendTime writes a time as time.Time's MarshalJSON does (RFC 3339 with
// nanoseconds), refusing what it refuses: a year outside [0,9999], a zone
// offset of a day or more.
func appendTime(b []byte, t time.Time) ([]byte, error) {
	b = append(b, '"')
	n := len(b)
	b = t.AppendFormat(b, time.RFC3339Nano)
	s := b[n:]
	num2 := func(b []byte) byte { return 10*(b[0]-'0') + (b[1] - '0') }
	bad := len(s) < len("2006-01-02T15:04:05Z") || s[len("9999")] != '-'
	if !bad && s[len(s)-1] != 'Z' {
		c := s[len(s)-len("Z07:00")]
		bad = ('0' <= c && c <= '9') || num2(s[len(s)-len("07:00"):]) >= 24
	}
	if bad {
		_, err := t.MarshalJSON()
		if err == nil {
			err = fmt.Errorf("time %v is not RFC 3339", t)
		}
		return nil, err
	}
	return append(b, '"'), nil
}

// AppendJSONString appends s as a JSON string, exactly as encoding/json
// writes it: for records of other packages that encode themselves.
func AppendJSONString(b []byte, s string) []byte { return appendJSONString(b, s) }

// AppendJSONTime appends t as time.Time's MarshalJSON writes it, and
// fails where it fails: for records of other packages that encode
// themselves.
func AppendJSONTime(b []byte, t time.Time) ([]byte, error) { return appendTime(b, t) }

// appendString writes s as a JSON string exactly as encoding/json does
// (HTML-escaping on): <, >, &, control characters, invalid UTF-8, U+2028
// and U+2029 escaped.
func appendJSONString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf {
			if htmlSafe(c) {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch c {
			case '\\', '"':
				dst = append(dst, '\\', c)
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[r&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

const hexDigits = "0123456789abcdef"

// htmlSafe is encoding/json's htmlSafeSet: printable ASCII (and DEL) but
// for ", \, <, > and &.
func htmlSafe(c byte) bool {
	return c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&'
}
