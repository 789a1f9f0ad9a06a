package kv

import (
	"encoding/json"
	"time"
	"unicode/utf8"

	"holon.dev/holon"
	"holon.dev/holon/journal"
)

// decodeValue decodes a stored value into v. The records a call reads
// (receipts, holds, accounts, budgets, agent records, documents) take a
// fast path when the value is in the form encodeValue writes: known keys,
// strings without escapes. Anything else (an escape, an unknown or
// differently cased key, a null where a value belongs, a malformed value)
// is left to encoding/json, whose result and errors are the reference:
// TestDecode_SameAsEncodingJSON and FuzzDecode hold the fast path to them.
func decodeValue(data []byte, v any) error {
	switch v := v.(type) {
	case *holon.Receipt:
		var r holon.Receipt
		if s := (scan{b: data}); s.receipt(&r) && s.end() {
			*v = r
			return nil
		}
	case *holon.Hold:
		var h holon.Hold
		if s := (scan{b: data}); s.hold(&h) && s.end() {
			*v = h
			return nil
		}
	case *holon.Account:
		var a holon.Account
		if s := (scan{b: data}); s.account(&a) && s.end() {
			*v = a
			return nil
		}
	case *holon.Budget:
		var b holon.Budget
		if s := (scan{b: data}); s.budget(&b) && s.end() {
			*v = b
			return nil
		}
	case *holon.Record:
		var r holon.Record
		if s := (scan{b: data}); s.record(&r) && s.end() {
			*v = r
			return nil
		}
	case *holon.Doc:
		var d holon.Doc
		if s := (scan{b: data}); s.doc(&d) && s.end() {
			*v = d
			return nil
		}
	}
	return json.Unmarshal(data, v)
}

// scan reads JSON in the form the store writes; every method returns false
// at the first thing outside that form, and the caller falls back.
type scan struct {
	b []byte
	i int
}

func (s *scan) ws() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

// end reports whether nothing but white space is left.
func (s *scan) end() bool {
	s.ws()
	return s.i == len(s.b)
}

func (s *scan) byte(c byte) bool {
	s.ws()
	if s.i < len(s.b) && s.b[s.i] == c {
		s.i++
		return true
	}
	return false
}

func (s *scan) literal(lit string) bool {
	s.ws()
	if len(s.b)-s.i >= len(lit) && string(s.b[s.i:s.i+len(lit)]) == lit {
		s.i += len(lit)
		return true
	}
	return false
}

func (s *scan) null() bool { return s.literal("null") }

// token returns a string token with its quotes, when it has no escape, no
// control character and is valid UTF-8.
func (s *scan) token() ([]byte, bool) {
	s.ws()
	if s.i >= len(s.b) || s.b[s.i] != '"' {
		return nil, false
	}
	ascii := true
	for j := s.i + 1; j < len(s.b); j++ {
		switch c := s.b[j]; {
		case c == '"':
			tok := s.b[s.i : j+1]
			if !ascii && !utf8.Valid(tok) {
				return nil, false
			}
			s.i = j + 1
			return tok, true
		case c == '\\' || c < 0x20:
			return nil, false
		case c >= utf8.RuneSelf:
			ascii = false
		}
	}
	return nil, false
}

// raw returns a string's content (without quotes).
func (s *scan) raw() ([]byte, bool) {
	tok, ok := s.token()
	if !ok {
		return nil, false
	}
	return tok[1 : len(tok)-1], true
}

func (s *scan) str(dst *string) bool {
	b, ok := s.raw()
	if ok {
		*dst = string(b)
	}
	return ok
}

func (s *scan) optStr(dst **string) bool {
	if s.null() {
		*dst = nil
		return true
	}
	var v string
	if !s.str(&v) {
		return false
	}
	*dst = &v
	return true
}

func (s *scan) amount(dst *journal.Amount) bool {
	b, ok := s.raw()
	return ok && dst.UnmarshalText(b) == nil
}

// signed reads an amount that may be negative (a balance, a journal line).
func (s *scan) signed(dst *journal.Amount) bool {
	b, ok := s.raw()
	if !ok {
		return false
	}
	neg := len(b) > 0 && b[0] == '-'
	if neg {
		b = b[1:]
	}
	if dst.UnmarshalText(b) != nil {
		return false
	}
	if neg {
		*dst = -*dst
	}
	return true
}

func (s *scan) time(dst *time.Time) bool {
	tok, ok := s.token()
	return ok && dst.UnmarshalJSON(tok) == nil
}

func (s *scan) bool(dst *bool) bool {
	switch {
	case s.literal("true"):
		*dst = true
	case s.literal("false"):
		*dst = false
	default:
		return false
	}
	return true
}

// digits reads an unsigned JSON integer (no sign, fraction or exponent)
// that fits in 63 bits.
func (s *scan) digits() (uint64, bool) {
	s.ws()
	start := s.i
	var n uint64
	for s.i < len(s.b) && s.b[s.i] >= '0' && s.b[s.i] <= '9' {
		if n > (1<<63-1)/10 {
			return 0, false
		}
		n = n*10 + uint64(s.b[s.i]-'0')
		s.i++
	}
	switch {
	case s.i == start, s.b[start] == '0' && s.i-start > 1, n > 1<<63-1:
		return 0, false
	case s.i < len(s.b) && (s.b[s.i] == '.' || s.b[s.i] == 'e' || s.b[s.i] == 'E'):
		return 0, false
	}
	return n, true
}

func (s *scan) int(dst *int64) bool {
	neg := s.byte('-')
	if neg && (s.i >= len(s.b) || s.b[s.i] < '0' || s.b[s.i] > '9') {
		return false // white space after the sign is not JSON
	}
	n, ok := s.digits()
	if !ok {
		return false
	}
	*dst = int64(n)
	if neg {
		*dst = -*dst
	}
	return true
}

func (s *scan) uint(dst *uint64) bool {
	n, ok := s.digits()
	*dst = n
	return ok
}

// object reads an object, handing each key to field, which reads the value.
func (s *scan) object(field func(key []byte) bool) bool {
	if !s.byte('{') {
		return false
	}
	if s.byte('}') {
		return true
	}
	for {
		key, ok := s.raw()
		if !ok || !s.byte(':') || !field(key) {
			return false
		}
		if !s.byte(',') {
			return s.byte('}')
		}
	}
}

// array reads an array, calling elem for each element; null leaves it nil,
// [] makes it empty (not nil), as encoding/json does.
func (s *scan) array(isNull func(), empty func(), elem func() bool) bool {
	if s.null() {
		isNull()
		return true
	}
	if !s.byte('[') {
		return false
	}
	empty()
	if s.byte(']') {
		return true
	}
	for {
		if !elem() {
			return false
		}
		if !s.byte(',') {
			return s.byte(']')
		}
	}
}

func (s *scan) strings(dst *[]string) bool {
	return s.array(func() { *dst = nil }, func() { *dst = []string{} }, func() bool {
		var v string
		if !s.str(&v) {
			return false
		}
		*dst = append(*dst, v)
		return true
	})
}

func (s *scan) shares(dst *[]journal.Share) bool {
	return s.array(func() { *dst = nil }, func() { *dst = make([]journal.Share, 0, 3) }, func() bool {
		var sh journal.Share
		ok := s.object(func(key []byte) bool {
			switch string(key) {
			case "to":
				return s.str(&sh.To)
			case "amount":
				return s.amount(&sh.Amount)
			}
			return false
		})
		*dst = append(*dst, sh)
		return ok
	})
}

// value skips one JSON value and returns it: for documents the store keeps
// opaque. It only finds the value's end; the caller checks it is JSON.
func (s *scan) value() ([]byte, bool) {
	s.ws()
	start, depth, inString := s.i, 0, false
	for ; s.i < len(s.b); s.i++ {
		c := s.b[s.i]
		if inString {
			switch c {
			case '\\':
				s.i++
			case '"':
				inString = false
				if depth == 0 {
					s.i++
					return s.b[start:s.i], true
				}
			}
			continue
		}
		switch c {
		case '"':
			inString = true
		case '{', '[':
			depth++
		case '}', ']':
			depth--
			if depth < 0 {
				return s.b[start:s.i], s.i > start
			}
			if depth == 0 {
				s.i++
				return s.b[start:s.i], true
			}
		case ',', ' ', '\t', '\n', '\r':
			if depth == 0 {
				return s.b[start:s.i], s.i > start
			}
		}
	}
	return s.b[start:s.i], depth == 0 && !inString && s.i > start
}

func (s *scan) receipt(r *holon.Receipt) bool {
	return s.object(func(key []byte) bool {
		switch string(key) {
		case "id":
			return s.str(&r.ID)
		case "parent":
			return s.optStr(&r.Parent)
		case "mandate":
			return s.str(&r.Mandate)
		case "caller":
			return s.str(&r.Caller)
		case "agent":
			return s.optStr(&r.Agent)
		case "status":
			return s.str(&r.Status)
		case "error":
			return s.optStr(&r.Error)
		case "approval":
			return s.optStr(&r.Approval)
		case "worst_case":
			if s.null() {
				r.WorstCase = nil
				return true
			}
			var a journal.Amount
			r.WorstCase = &a
			return s.amount(&a)
		case "currency":
			return s.str(&r.Currency)
		case "payer":
			return s.str(&r.Payer)
		case "sub_mandate":
			return s.optStr(&r.SubMandate)
		case "billed":
			return s.bool(&r.Billed)
		case "cost":
			return s.object(func(key []byte) bool {
				switch string(key) {
				case "own":
					return s.amount(&r.Cost.Own)
				case "downstream":
					return s.amount(&r.Cost.Downstream)
				case "total":
					return s.amount(&r.Cost.Total)
				}
				return false
			})
		case "splits":
			return s.shares(&r.Splits)
		case "children":
			return s.strings(&r.Children)
		case "duration_ms":
			return s.int(&r.DurationMS)
		case "created":
			return s.time(&r.Created)
		}
		return false
	})
}

func (s *scan) hold(h *holon.Hold) bool {
	return s.object(func(key []byte) bool {
		switch string(key) {
		case "receipt":
			return s.str(&h.Receipt)
		case "payer":
			return s.str(&h.Payer)
		case "amount":
			return s.amount(&h.Amount)
		case "mandate":
			return s.str(&h.Mandate)
		case "reserved":
			return s.amount(&h.Reserved)
		case "window":
			return s.str(&h.Window)
		case "funder":
			return s.str(&h.Funder)
		case "parent":
			return s.str(&h.Parent)
		case "children":
			return s.strings(&h.Children)
		case "downstream":
			return s.amount(&h.Downstream)
		case "sub_mandate":
			return s.str(&h.SubMandate)
		case "started":
			return s.time(&h.Started)
		}
		return false
	})
}

func (s *scan) account(a *holon.Account) bool {
	seen := false
	ok := s.object(func(key []byte) bool {
		switch string(key) {
		case "balance":
			seen = true
			return s.signed(&a.Balance)
		case "held":
			return s.amount(&a.Held)
		}
		return false
	})
	// Account.UnmarshalJSON refuses a missing balance: let it say so.
	return ok && seen
}

func (s *scan) budget(b *holon.Budget) bool {
	return s.object(func(key []byte) bool {
		switch string(key) {
		case "spent":
			return s.amount(&b.Spent)
		case "reserved":
			return s.amount(&b.Reserved)
		}
		return false
	})
}

func (s *scan) record(r *holon.Record) bool {
	return s.object(func(key []byte) bool {
		switch string(key) {
		case "runs":
			return s.int(&r.Runs)
		case "succeeded":
			return s.int(&r.Succeeded)
		case "billed":
			return s.amount(&r.Billed)
		case "duration_ms":
			return s.int(&r.DurationMS)
		}
		return false
	})
}

func (s *scan) doc(d *holon.Doc) bool {
	return s.object(func(key []byte) bool {
		switch string(key) {
		case "doc":
			v, ok := s.value()
			if !ok || (len(v) > 0 && v[0] == 'n') || !json.Valid(v) {
				return false
			}
			d.Doc = append(json.RawMessage(nil), v...)
			return true
		case "created":
			return s.time(&d.Created)
		case "published":
			return s.bool(&d.Published)
		case "yanked":
			return s.str(&d.Yanked)
		case "revoked":
			return s.bool(&d.Revoked)
		}
		return false
	})
}
