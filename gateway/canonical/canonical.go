package canonical

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math"
	"slices"
	"strconv"
	"sync"
	"unicode/utf16"
	"unicode/utf8"
)

// maxCanonicalDepth bounds the nesting of arrays and objects, as
// encoding/json does, so a hostile input cannot make the parser recurse
// without end.
const maxCanonicalDepth = 10000

// JSON returns b in the JSON Canonicalization Scheme (RFC 8785).
//
// The input must be I-JSON (RFC 7493): one JSON value, optionally surrounded
// by whitespace, in valid UTF-8, with no lone surrogate in a string, no
// duplicate key in an object and no number outside the range of an IEEE-754
// double. Anything else is an *Error that names the problem and its byte
// offset.
func JSON(b []byte) ([]byte, error) {
	p := canonParser{in: b}
	defer p.release()
	root, err := p.parse()
	if err != nil {
		return nil, err
	}
	return p.write(make([]byte, 0, len(b)), &root), nil
}

// AppendJSON appends the canonical form of b (one JSON value, as JSON
// requires) to dst: a writer of a larger canonical document puts a value
// it holds as JSON in its place, without parsing the document around it.
func AppendJSON(dst, b []byte) ([]byte, error) {
	p := canonParser{in: b}
	defer p.release()
	root, err := p.parse()
	if err != nil {
		return dst, err
	}
	return p.write(dst, &root), nil
}

// AppendString appends s as RFC 8785 writes a string. Invalid UTF-8 is
// first coerced as encoding/json coerces it, each invalid byte becoming
// U+FFFD, so that a Go value's canonical form written by hand is the one
// json.Marshal and JSON would give.
func AppendString(dst []byte, s string) []byte {
	if !utf8.ValidString(s) {
		var b []byte
		for i := 0; i < len(s); {
			r, n := utf8.DecodeRuneInString(s[i:])
			if r == utf8.RuneError && n == 1 {
				b = utf8.AppendRune(b, utf8.RuneError)
			} else {
				b = append(b, s[i:i+n]...)
			}
			i += n
		}
		s = string(b)
	}
	return appendCanonicalString(dst, s)
}

// stacks recycles the parsers' member and element stacks and arenas.
var stacks = sync.Pool{New: func() any { return new(parseStacks) }}

type parseStacks struct {
	members, arenaM []canonMember
	elems, arenaE   []canonNode
}

// maxPooled bounds the stacks and arenas kept for the next parse (in
// entries), so that one large document does not keep its memory.
const maxPooled = 4096

// parse reads the one JSON value of the whole input. The tree it returns
// lives in the parser's arenas: release ends it.
func (p *canonParser) parse() (canonNode, error) {
	// The scalars' canonical text is about as long as the input: one
	// allocation rather than a slice grown scalar by scalar.
	p.scalars = make([]byte, 0, len(p.in))
	p.st = stacks.Get().(*parseStacks)
	p.members, p.elems = p.st.members[:0], p.st.elems[:0]
	p.arenaM, p.arenaE = p.st.arenaM[:0], p.st.arenaE[:0]
	p.skipSpace()
	root, err := p.value(0)
	if err != nil {
		return root, err
	}
	p.skipSpace()
	if p.pos < len(p.in) {
		return root, p.errorf("unexpected %s after the JSON value: trailing data is not accepted", p.describe())
	}
	return root, nil
}

// Hash returns the lowercase hex SHA-256 of the canonical form of b (JSON),
// so equal JSON values hash alike however they are written.
func Hash(b []byte) (string, error) {
	c, err := JSON(b)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(c)
	return hex.EncodeToString(sum[:]), nil
}

// canonParser reads JSON from in into a tree of canonNodes, which write then
// lays out canonically. Building the tree first keeps the work linear: an
// object's members are sorted once, and no subtree is copied at every level
// it is nested in.
type canonParser struct {
	in      []byte
	pos     int
	scalars []byte // the canonical text of every scalar, end to end
	// members and elems are stacks the objects and arrays being parsed
	// collect their members and elements on (an inner one's above its
	// outer's), each copied out once whole: one allocation of the right
	// size per object or array, not one per doubling.
	members []canonMember
	elems   []canonNode
	// arenaM and arenaE hold every object's members and every array's
	// elements once complete, end to end (a tree's nodes point into them),
	// recycled with the stacks (st) once the tree is done with (release).
	arenaM []canonMember
	arenaE []canonNode
	st     *parseStacks
}

// release gives the parser's stacks and arenas back for the next parse:
// the tree parse returned must not be used after it.
func (p *canonParser) release() {
	st := p.st
	if st == nil {
		return
	}
	p.st = nil
	keep := func(n int) bool { return n <= maxPooled }
	if keep(cap(p.members)) && keep(cap(p.arenaM)) && keep(cap(p.elems)) && keep(cap(p.arenaE)) {
		// Nothing of this parse stays reachable from the pool: the stacks
		// were cleared as they were popped, the arenas only grew.
		clear(p.arenaM)
		clear(p.arenaE)
		st.members, st.elems, st.arenaM, st.arenaE = p.members[:0], p.elems[:0], p.arenaM[:0], p.arenaE[:0]
		stacks.Put(st)
	}
	p.members, p.elems, p.arenaM, p.arenaE = nil, nil, nil, nil
}

// canonNode is one JSON value.
type canonNode struct {
	kind   byte // 's' for a scalar, '[' for an array, '{' for an object
	lo, hi int  // a scalar's canonical text, in canonParser.scalars
	// start and end are the value's bytes in the input, as written.
	start, end int
	// text is a string's decoded value, or a number's text as written
	// (Value).
	text    string
	elems   []canonNode   // an array's elements
	members []canonMember // an object's members, sorted by key
}

// canonMember is one member of an object.
type canonMember struct {
	key   string // decoded, so valid UTF-8
	at    int    // the key's byte offset in the input, for errors
	value canonNode
}

func (p *canonParser) errorf(format string, args ...any) error {
	return p.errorAt(p.pos, format, args...)
}

func (p *canonParser) errorAt(at int, format string, args ...any) error {
	return &Error{Offset: at, Msg: fmt.Sprintf(format, args...)}
}

// describe names the byte at the current position for an error message.
func (p *canonParser) describe() string {
	if p.pos >= len(p.in) {
		return "end of input"
	}
	c := p.in[p.pos]
	if c >= 0x20 && c < 0x7f {
		return strconv.QuoteRune(rune(c))
	}
	return fmt.Sprintf("byte 0x%02x", c)
}

func (p *canonParser) skipSpace() {
	for p.pos < len(p.in) {
		switch p.in[p.pos] {
		case ' ', '\t', '\n', '\r':
			p.pos++
		default:
			return
		}
	}
}

// write appends the canonical form of n.
func (p *canonParser) write(dst []byte, n *canonNode) []byte {
	switch n.kind {
	case '[':
		dst = append(dst, '[')
		for i := range n.elems {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = p.write(dst, &n.elems[i])
		}
		return append(dst, ']')
	case '{':
		dst = append(dst, '{')
		for i := range n.members {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = appendCanonicalString(dst, n.members[i].key)
			dst = append(dst, ':')
			dst = p.write(dst, &n.members[i].value)
		}
		return append(dst, '}')
	default:
		return append(dst, p.scalars[n.lo:n.hi]...)
	}
}

// value parses the value at the current position.
func (p *canonParser) value(depth int) (canonNode, error) {
	if p.pos >= len(p.in) {
		return canonNode{}, p.errorf("unexpected end of input, want a JSON value")
	}
	lo, start := len(p.scalars), p.pos
	var err error
	var text string
	switch c := p.in[p.pos]; {
	case c == '{':
		n, err := p.object(depth + 1)
		n.start, n.end = start, p.pos
		return n, err
	case c == '[':
		n, err := p.array(depth + 1)
		n.start, n.end = start, p.pos
		return n, err
	case c == '"':
		if text, err = p.string(); err == nil {
			p.scalars = appendCanonicalString(p.scalars, text)
		}
	case c == '-' || c >= '0' && c <= '9':
		text, err = p.number()
	case c == 't':
		err = p.literal("true")
	case c == 'f':
		err = p.literal("false")
	case c == 'n':
		err = p.literal("null")
	default:
		err = p.errorf("unexpected %s, want a JSON value", p.describe())
	}
	return canonNode{kind: 's', lo: lo, hi: len(p.scalars), text: text, start: start, end: p.pos}, err
}

func (p *canonParser) literal(word string) error {
	if len(p.in)-p.pos < len(word) || string(p.in[p.pos:p.pos+len(word)]) != word {
		return p.errorf("invalid literal, want %s", word)
	}
	p.pos += len(word)
	p.scalars = append(p.scalars, word...)
	return nil
}

func (p *canonParser) array(depth int) (canonNode, error) {
	n := canonNode{kind: '['}
	if depth > maxCanonicalDepth {
		return n, p.errorf("nesting deeper than %d", maxCanonicalDepth)
	}
	p.pos++ // '['
	p.skipSpace()
	if p.pos < len(p.in) && p.in[p.pos] == ']' {
		p.pos++
		return n, nil
	}
	base := len(p.elems)
	defer func() { clear(p.elems[base:]); p.elems = p.elems[:base] }()
	for {
		p.skipSpace()
		elem, err := p.value(depth)
		if err != nil {
			return n, err
		}
		p.elems = append(p.elems, elem)
		p.skipSpace()
		if p.pos >= len(p.in) {
			return n, p.errorf("unexpected end of input in array")
		}
		switch p.in[p.pos] {
		case ',':
			p.pos++
		case ']':
			p.pos++
			start := len(p.arenaE)
			p.arenaE = append(p.arenaE, p.elems[base:]...)
			n.elems = p.arenaE[start:len(p.arenaE):len(p.arenaE)]
			return n, nil
		default:
			return n, p.errorf("unexpected %s in array, want ',' or ']'", p.describe())
		}
	}
}

func (p *canonParser) object(depth int) (canonNode, error) {
	n := canonNode{kind: '{'}
	if depth > maxCanonicalDepth {
		return n, p.errorf("nesting deeper than %d", maxCanonicalDepth)
	}
	p.pos++ // '{'
	p.skipSpace()
	if p.pos < len(p.in) && p.in[p.pos] == '}' {
		p.pos++
		return n, nil
	}
	base := len(p.members)
	defer func() { clear(p.members[base:]); p.members = p.members[:base] }()
	for {
		p.skipSpace()
		if p.pos >= len(p.in) || p.in[p.pos] != '"' {
			return n, p.errorf("unexpected %s in object, want a string key", p.describe())
		}
		m := canonMember{at: p.pos}
		var err error
		if m.key, err = p.string(); err != nil {
			return n, err
		}
		p.skipSpace()
		if p.pos >= len(p.in) || p.in[p.pos] != ':' {
			return n, p.errorf("unexpected %s after object key, want ':'", p.describe())
		}
		p.pos++
		p.skipSpace()
		if m.value, err = p.value(depth); err != nil {
			return n, err
		}
		p.members = append(p.members, m)
		p.skipSpace()
		if p.pos >= len(p.in) {
			return n, p.errorf("unexpected end of input in object")
		}
		if p.in[p.pos] == '}' {
			p.pos++
			break
		}
		if p.in[p.pos] != ',' {
			return n, p.errorf("unexpected %s in object, want ',' or '}'", p.describe())
		}
		p.pos++
	}
	start := len(p.arenaM)
	p.arenaM = append(p.arenaM, p.members[base:]...)
	n.members = p.arenaM[start:len(p.arenaM):len(p.arenaM)]
	// Sorted, equal keys are neighbours: a duplicate is found without a set.
	slices.SortFunc(n.members, func(a, b canonMember) int { return compareUTF16(a.key, b.key) })
	for i := 1; i < len(n.members); i++ {
		if a, b := &n.members[i-1], &n.members[i]; a.key == b.key {
			return n, p.errorAt(max(a.at, b.at), "duplicate key %s", strconv.Quote(a.key))
		}
	}
	return n, nil
}

// string parses the string at the current position (its opening quote) and
// returns its decoded value, which is always valid UTF-8.
func (p *canonParser) string() (string, error) {
	p.pos++ // '"'
	var buf []byte
	for first := true; ; first = false {
		// Copy the run of bytes that need no decoding in one go.
		run := p.pos
		for p.pos < len(p.in) {
			c := p.in[p.pos]
			if c == '"' || c == '\\' || c < 0x20 || c >= utf8.RuneSelf {
				break
			}
			p.pos++
		}
		if first && p.pos < len(p.in) && p.in[p.pos] == '"' {
			// The whole string is one run: no buffer.
			p.pos++
			return string(p.in[run : p.pos-1]), nil
		}
		buf = append(buf, p.in[run:p.pos]...)
		if p.pos >= len(p.in) {
			return "", p.errorf("unexpected end of input in string")
		}
		switch c := p.in[p.pos]; {
		case c == '"':
			p.pos++
			return string(buf), nil
		case c < 0x20:
			return "", p.errorf("unescaped control character 0x%02x in string", c)
		case c >= utf8.RuneSelf:
			r, size := utf8.DecodeRune(p.in[p.pos:])
			if r == utf8.RuneError && size == 1 {
				return "", p.errorf("invalid UTF-8 in string")
			}
			buf = append(buf, p.in[p.pos:p.pos+size]...)
			p.pos += size
		default: // '\\'
			r, err := p.escape()
			if err != nil {
				return "", err
			}
			buf = utf8.AppendRune(buf, r)
		}
	}
}

// escape decodes the escape sequence at the current position (its
// backslash), joining a \u surrogate pair into one code point.
func (p *canonParser) escape() (rune, error) {
	if p.pos+1 >= len(p.in) {
		p.pos = len(p.in)
		return 0, p.errorf("unexpected end of input in string")
	}
	var r rune
	switch c := p.in[p.pos+1]; c {
	case '"', '\\', '/':
		r = rune(c)
	case 'b':
		r = '\b'
	case 'f':
		r = '\f'
	case 'n':
		r = '\n'
	case 'r':
		r = '\r'
	case 't':
		r = '\t'
	case 'u':
		return p.unicodeEscape()
	default:
		p.pos++
		return 0, p.errorf("invalid escape in string: %s after a backslash", p.describe())
	}
	p.pos += 2
	return r, nil
}

// unicodeEscape decodes the \uXXXX at the current position and, if it is a
// high surrogate, the \uXXXX low surrogate that must follow it.
func (p *canonParser) unicodeEscape() (rune, error) {
	r, ok := p.hex4(p.pos + 2)
	if !ok {
		return 0, p.errorf("invalid \\u escape in string")
	}
	if !utf16.IsSurrogate(r) {
		p.pos += 6
		return r, nil
	}
	if r < 0xdc00 && p.pos+12 <= len(p.in) && p.in[p.pos+6] == '\\' && p.in[p.pos+7] == 'u' {
		if lo, ok := p.hex4(p.pos + 8); ok {
			if pair := utf16.DecodeRune(r, lo); pair != utf8.RuneError {
				p.pos += 12
				return pair, nil
			}
		}
	}
	return 0, p.errorf("lone surrogate \\u%04x in string", r)
}

// hex4 reads the four hex digits at in[at:].
func (p *canonParser) hex4(at int) (rune, bool) {
	if at+4 > len(p.in) {
		return 0, false
	}
	var r rune
	for _, c := range p.in[at : at+4] {
		switch {
		case c >= '0' && c <= '9':
			r = r<<4 | rune(c-'0')
		case c >= 'a' && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case c >= 'A' && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			return 0, false
		}
	}
	return r, true
}

// number checks the JSON number grammar, reads the number as an IEEE-754
// double and appends it as ECMAScript would print it. It returns the
// number's text as written.
func (p *canonParser) number() (string, error) {
	start := p.pos
	digits := func() int {
		n := 0
		for p.pos < len(p.in) && p.in[p.pos] >= '0' && p.in[p.pos] <= '9' {
			p.pos++
			n++
		}
		return n
	}
	if p.in[p.pos] == '-' {
		p.pos++
	}
	switch {
	case p.pos < len(p.in) && p.in[p.pos] == '0':
		p.pos++
	case digits() == 0:
		return "", p.errorf("invalid number, want a digit")
	}
	if p.pos < len(p.in) && p.in[p.pos] == '.' {
		p.pos++
		if digits() == 0 {
			return "", p.errorf("invalid number, want a digit after '.'")
		}
	}
	if p.pos < len(p.in) && (p.in[p.pos] == 'e' || p.in[p.pos] == 'E') {
		p.pos++
		if p.pos < len(p.in) && (p.in[p.pos] == '+' || p.in[p.pos] == '-') {
			p.pos++
		}
		if digits() == 0 {
			return "", p.errorf("invalid number, want a digit in the exponent")
		}
	}
	text := string(p.in[start:p.pos])
	f, err := strconv.ParseFloat(text, 64)
	if err != nil || math.IsInf(f, 0) {
		// The grammar was checked above, so only a number too large for a
		// double can fail here; one too small rounds to zero, as in
		// ECMAScript.
		p.pos = start
		return "", p.errorf("number %s is out of the range of a double", text)
	}
	p.scalars = appendECMAScriptNumber(p.scalars, f)
	return text, nil
}

// appendECMAScriptNumber appends f as ECMAScript's Number::toString does
// (ECMA-262, Number::toString, as RFC 8785 §3.2.2.3 requires): the shortest
// digits that round-trip, laid out in plain notation for exponents from -6
// to 20 and in exponent notation otherwise. f must be finite.
func appendECMAScriptNumber(dst []byte, f float64) []byte {
	if f == 0 { // both zeros
		return append(dst, '0')
	}
	if f < 0 {
		dst = append(dst, '-')
		f = -f
	}
	// 'e' with the shortest precision gives "d.ddde±xx": the digits and the
	// exponent, which ECMAScript's layout needs apart.
	var tmp [32]byte
	e := strconv.AppendFloat(tmp[:0], f, 'e', -1, 64)
	mark := slices.Index(e, 'e')
	exp, _ := strconv.Atoi(string(e[mark+1:])) // always a valid exponent
	digits := make([]byte, 0, 17)
	digits = append(digits, e[0])
	if mark > 1 {
		digits = append(digits, e[2:mark]...)
	}
	k, n := len(digits), exp+1 // the value is 0.digits × 10^n
	switch {
	case k <= n && n <= 21:
		dst = append(dst, digits...)
		for range n - k {
			dst = append(dst, '0')
		}
	case 0 < n && n <= 21:
		dst = append(dst, digits[:n]...)
		dst = append(dst, '.')
		dst = append(dst, digits[n:]...)
	case -6 < n && n <= 0:
		dst = append(dst, "0."...)
		for range -n {
			dst = append(dst, '0')
		}
		dst = append(dst, digits...)
	default:
		dst = append(dst, digits[0])
		if k > 1 {
			dst = append(dst, '.')
			dst = append(dst, digits[1:]...)
		}
		dst = append(dst, 'e')
		if n-1 >= 0 {
			dst = append(dst, '+')
		}
		dst = strconv.AppendInt(dst, int64(n-1), 10)
	}
	return dst
}

// appendCanonicalString appends s, valid UTF-8, as a JSON string the way
// ECMAScript's JSON.stringify writes it (RFC 8785 §3.2.2.2): only '"', '\'
// and the control characters are escaped, the latter with the short escape
// where JSON has one and as lowercase \u00xx otherwise.
func appendCanonicalString(dst []byte, s string) []byte {
	const hexDigits = "0123456789abcdef"
	dst = append(dst, '"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '"' || c == '\\':
			dst = append(dst, '\\', c)
		case c == '\b':
			dst = append(dst, '\\', 'b')
		case c == '\t':
			dst = append(dst, '\\', 't')
		case c == '\n':
			dst = append(dst, '\\', 'n')
		case c == '\f':
			dst = append(dst, '\\', 'f')
		case c == '\r':
			dst = append(dst, '\\', 'r')
		case c < 0x20:
			dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
		default:
			dst = append(dst, c)
		}
	}
	return append(dst, '"')
}

// compareUTF16 orders two valid UTF-8 strings as their UTF-16 code units
// would sort (RFC 8785 §3.2.3), without converting them: code points sort by
// value, except that those above U+FFFF, written as surrogate pairs starting
// at 0xD800, sort before U+E000–U+FFFF.
func compareUTF16(a, b string) int {
	for a != "" && b != "" {
		ra, na := utf8.DecodeRuneInString(a)
		rb, nb := utf8.DecodeRuneInString(b)
		if ra != rb {
			return cmp.Compare(utf16Rank(ra), utf16Rank(rb))
		}
		a, b = a[na:], b[nb:]
	}
	return cmp.Compare(len(a), len(b))
}

// utf16Rank maps a code point to a number that orders code points as their
// UTF-16 encodings do: below U+D800 a code point is its own code unit, a
// supplementary one starts with a surrogate (0xD800–0xDBFF) and so goes
// next, and U+E000–U+FFFF come last.
func utf16Rank(r rune) rune {
	switch {
	case r < 0xd800:
		return r
	case r >= 0x10000:
		return 0xd800 + (r - 0x10000)
	default:
		return r + 0x100000
	}
}
