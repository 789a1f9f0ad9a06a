package semver

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
)

// Range is an npm-style version range: comparator sets joined by "||", each
// set a space-separated AND of comparators, carets, tildes, x-ranges or one
// hyphen range. A pre-release version is in a set only when the set also
// names a pre-release of the same MAJOR.MINOR.PATCH. The zero Range is the
// empty range "", which admits every release.
type Range struct {
	raw  string
	sets []interval // nil only in the zero Range
}

// interval is one comparator set: the versions from lo to hi, of which only
// the pre-releases of the tuples in pre. The lower bound is always present
// (minVersion when the set has none); the upper one only when hasHi.
type interval struct {
	lo    Version
	loInc bool
	hi    Version
	hiInc bool
	hasHi bool
	pre   []tuple
}

// minVersion is the lowest version there is: 0 is the lowest identifier, and
// one identifier sorts before several.
var minVersion = Version{Pre: []string{"0"}}

// anyInterval admits every release.
func anyInterval() interval { return interval{lo: minVersion, loInc: true} }

// ParseRange parses an npm-style version range such as "^1.2", "~1.2.3",
// "1.x", ">=1.0.0 <2.0.0", "1.2.3 - 2.3.4" or "^1 || ^2".
func ParseRange(s string) (Range, error) {
	sets, err := parseRangeSets(s)
	if err != nil {
		return Range{}, fmt.Errorf("invalid range %q: %w", s, err)
	}
	return Range{raw: s, sets: sets}, nil
}

// String returns the range as it was written.
func (r Range) String() string { return r.raw }

// MarshalText returns the range as it was written.
func (r Range) MarshalText() ([]byte, error) { return []byte(r.raw), nil }

// UnmarshalText parses text with ParseRange.
func (r *Range) UnmarshalText(text []byte) error {
	p, err := ParseRange(string(text))
	if err != nil {
		return err
	}
	*r = p
	return nil
}

// Contains reports whether v satisfies the range.
func (r Range) Contains(v Version) bool {
	for _, s := range r.intervals() {
		if s.contains(v) {
			return true
		}
	}
	return false
}

// Highest returns the highest version of vs that r contains (the first of
// equals that differ only in build metadata), and false when none is.
func Highest(vs []Version, r Range) (Version, bool) {
	var best Version
	found := false
	for _, v := range vs {
		if r.Contains(v) && (!found || v.Compare(best) > 0) {
			best, found = v, true
		}
	}
	return best, found
}

// Subset reports whether every version r contains is also contained by of.
//
// It is exact for releases. For pre-releases it is conservative: it may
// answer false for a range that is in fact a subset, never true for one that
// is not.
func (r Range) Subset(of Range) bool {
	mine, theirs := r.intervals(), of.intervals()
	var theirReleases []releaseSpan
	for _, s := range theirs {
		if rs, ok := s.releases(); ok {
			theirReleases = append(theirReleases, rs)
		}
	}
	theirReleases = mergeReleaseSpans(theirReleases)
	for _, s := range mine {
		if rs, ok := s.releases(); ok && !rs.coveredBy(theirReleases) {
			return false
		}
		for _, t := range s.pre {
			sp, ok := s.preSpan(t)
			if !ok {
				continue
			}
			var their []preSpan
			for _, o := range theirs {
				if !o.allowsPre(t) {
					continue
				}
				if osp, ok := o.preSpan(t); ok {
					their = append(their, osp)
				}
			}
			if !sp.coveredBy(mergePreSpans(their)) {
				return false
			}
		}
	}
	return true
}

// intervals returns the comparator sets, the zero Range being "".
func (r Range) intervals() []interval {
	if r.sets == nil {
		return []interval{anyInterval()}
	}
	return r.sets
}

func (s interval) contains(v Version) bool {
	if c := v.Compare(s.lo); c < 0 || c == 0 && !s.loInc {
		return false
	}
	if s.hasHi {
		if c := v.Compare(s.hi); c > 0 || c == 0 && !s.hiInc {
			return false
		}
	}
	return !v.IsPrerelease() || s.allowsPre(v.tuple())
}

func (s interval) allowsPre(t tuple) bool { return slices.Contains(s.pre, t) }

// atLeast raises the lower bound to v.
func (s *interval) atLeast(v Version, inclusive bool) {
	if c := v.Compare(s.lo); c > 0 || c == 0 && !inclusive {
		s.lo, s.loInc = v, inclusive
	}
}

// atMost lowers the upper bound to v.
func (s *interval) atMost(v Version, inclusive bool) {
	if !s.hasHi {
		s.hi, s.hiInc, s.hasHi = v, inclusive, true
		return
	}
	if c := v.Compare(s.hi); c < 0 || c == 0 && !inclusive {
		s.hi, s.hiInc = v, inclusive
	}
}

// below lowers the upper bound to exclude v and its pre-releases; ok false
// means v is past the highest version, so there is nothing to exclude.
func (s *interval) below(v Version, ok bool) {
	if ok {
		v.Pre = []string{"0"}
		s.atMost(v, false)
	}
}

// none empties the set.
func (s *interval) none() { s.atMost(minVersion, false) }

func (s *interval) allowPre(t tuple) {
	if !s.allowsPre(t) {
		s.pre = append(s.pre, t)
	}
}

// Version bump levels.
const (
	levelMajor = iota
	levelMinor
	levelPatch
)

// bump returns the lowest release above every version of t that agrees with
// it up to level (1.2.3 bumped at levelMinor is 1.3.0), carrying over when a
// part is at its maximum; ok is false when there is no such release.
func bump(t tuple, level int) (Version, bool) {
	for ; level >= levelMajor; level-- {
		if t[level] == math.MaxUint64 {
			continue
		}
		n := tuple{}
		copy(n[:level], t[:level])
		n[level] = t[level] + 1
		return Version{Major: n[0], Minor: n[1], Patch: n[2]}, true
	}
	return Version{}, false
}

// partial is a possibly incomplete version in a range: "1", "1.2", "1.x", "*".
type partial struct {
	n   int   // numeric parts given (0 to 3); the others are wildcards
	t   tuple // the numeric parts, zero where a wildcard
	pre []string
}

// floor is the lowest version the partial stands for.
func (p partial) floor() Version {
	return Version{Major: p.t[0], Minor: p.t[1], Patch: p.t[2], Pre: p.pre}
}

func parsePartial(s string) (partial, error) {
	var p partial
	if s == "" {
		return p, errors.New("empty version")
	}
	if s[0] == 'v' || s[0] == 'V' {
		return p, fmt.Errorf("version %q: a leading %q is not allowed", s, s[:1])
	}
	main, qualified := s, false
	if i := strings.IndexAny(main, "-+"); i >= 0 {
		main, qualified = main[:i], true
	}
	parts := strings.Split(main, ".")
	if len(parts) > 3 {
		return p, fmt.Errorf("version %q has more than three parts", s)
	}
	wildcard := false
	for i, part := range parts {
		if part == "x" || part == "X" || part == "*" {
			wildcard = true
			continue
		}
		if wildcard {
			return p, fmt.Errorf("version %q has a number after a wildcard", s)
		}
		n, err := parseNumber(versionPartNames[i], part)
		if err != nil {
			return p, fmt.Errorf("version %q: %w", s, err)
		}
		p.t[i], p.n = n, i+1
	}
	if qualified {
		if p.n < 3 {
			return p, fmt.Errorf("version %q: a pre-release or build needs a full MAJOR.MINOR.PATCH", s)
		}
		v, err := parseVersion(s)
		if err != nil {
			return p, fmt.Errorf("version %q: %w", s, err)
		}
		p.pre = v.Pre
	}
	return p, nil
}

func parseRangeSets(s string) ([]interval, error) {
	alternatives := strings.Split(s, "||")
	sets := make([]interval, 0, len(alternatives))
	for _, alt := range alternatives {
		fields := strings.Fields(alt)
		if len(fields) == 0 && len(alternatives) > 1 {
			// npm reads an empty side as "*", which would silently widen the range.
			return nil, errors.New(`empty comparator set beside "||"`)
		}
		set, err := parseComparatorSet(fields)
		if err != nil {
			return nil, err
		}
		sets = append(sets, set)
	}
	return sets, nil
}

// operators are the comparator prefixes, longest first.
var operators = []string{">=", "<=", ">", "<", "=", "^", "~"}

func splitOperator(s string) (op, rest string) {
	for _, op := range operators {
		if strings.HasPrefix(s, op) {
			return op, s[len(op):]
		}
	}
	return "", s
}

func parseComparatorSet(fields []string) (interval, error) {
	set := anyInterval()
	if slices.Contains(fields, "-") {
		if len(fields) != 3 || fields[1] != "-" {
			return set, errors.New(`a hyphen range must be "A - B"`)
		}
		from, err := parseBarePartial(fields[0])
		if err != nil {
			return set, err
		}
		to, err := parseBarePartial(fields[2])
		if err != nil {
			return set, err
		}
		set.applyHyphen(from, to)
		return set, nil
	}
	for i := 0; i < len(fields); i++ {
		op, rest := splitOperator(fields[i])
		if rest == "" {
			// npm allows a space between an operator and its version: ">= 1.2.3".
			if i+1 == len(fields) {
				return set, fmt.Errorf("operator %q without a version", op)
			}
			i++
			rest = fields[i]
		}
		if next, _ := splitOperator(rest); next != "" {
			return set, fmt.Errorf("operator %q followed by operator %q", op, next)
		}
		p, err := parsePartial(rest)
		if err != nil {
			return set, err
		}
		set.apply(op, p)
	}
	return set, nil
}

// parseBarePartial parses one side of a hyphen range, which takes no operator.
func parseBarePartial(s string) (partial, error) {
	if op, _ := splitOperator(s); op != "" {
		return partial{}, fmt.Errorf("operator %q in a hyphen range", op)
	}
	return parsePartial(s)
}

// apply narrows the set by one comparator, with npm's desugaring: "1.2" is
// ">=1.2.0 <1.3.0-0", ">1.2" is ">=1.3.0", "<=1.2" is "<1.3.0-0", and so on.
func (s *interval) apply(op string, p partial) {
	if len(p.pre) > 0 {
		s.allowPre(p.t)
	}
	if p.n == 0 {
		// "*" alone, "=*", ">=*" and "<=*" admit everything, "<*" and ">*" nothing.
		if op == "<" || op == ">" {
			s.none()
		}
		return
	}
	switch op {
	case "", "=":
		if p.n == 3 {
			s.atLeast(p.floor(), true)
			s.atMost(p.floor(), true)
			return
		}
		s.atLeast(p.floor(), true)
		s.below(bump(p.t, p.n-1))
	case ">":
		if p.n == 3 {
			s.atLeast(p.floor(), false)
			return
		}
		v, ok := bump(p.t, p.n-1)
		if !ok {
			s.none()
			return
		}
		s.atLeast(v, true)
	case ">=":
		s.atLeast(p.floor(), true)
	case "<":
		if p.n == 3 {
			s.atMost(p.floor(), false)
			return
		}
		s.below(p.floor(), true)
	case "<=":
		if p.n == 3 {
			s.atMost(p.floor(), true)
			return
		}
		s.below(bump(p.t, p.n-1))
	case "~":
		// ~1 allows minor changes; ~1.2 and ~1.2.3 only patch changes.
		s.atLeast(p.floor(), true)
		level := levelMinor
		if p.n == 1 {
			level = levelMajor
		}
		s.below(bump(p.t, level))
	case "^":
		// ^ allows changes that keep the leftmost non-zero part given.
		s.atLeast(p.floor(), true)
		level := levelMajor
		switch {
		case p.t[0] != 0 || p.n == 1:
		case p.t[1] != 0 || p.n == 2:
			level = levelMinor
		default:
			level = levelPatch
		}
		s.below(bump(p.t, level))
	}
}

// applyHyphen narrows the set to "from - to": ">=from <=to", where a partial
// "to" admits everything it stands for (1.2.3 - 2 is >=1.2.3 <3.0.0-0).
func (s *interval) applyHyphen(from, to partial) {
	for _, p := range []partial{from, to} {
		if len(p.pre) > 0 {
			s.allowPre(p.t)
		}
	}
	if from.n > 0 {
		s.atLeast(from.floor(), true)
	}
	switch to.n {
	case 0:
	case 3:
		s.atMost(to.floor(), true)
	default:
		s.below(bump(to.t, to.n-1))
	}
}

// releaseSpan is the half-open span [lo, hi) of release versions, hi absent
// when !hasHi. Over the discrete releases, two spans that touch (one's hi is
// the other's lo) join without a gap.
type releaseSpan struct {
	lo, hi tuple
	hasHi  bool
}

func compareTuple(a, b tuple) int {
	for i := range a {
		if c := compareUint(a[i], b[i]); c != 0 {
			return c
		}
	}
	return 0
}

// releases returns the releases of s as a span, and false when it has none.
func (s interval) releases() (releaseSpan, bool) {
	var rs releaseSpan
	// The lowest release above a pre-release of t is t itself.
	rs.lo = s.lo.tuple()
	if !s.lo.IsPrerelease() && !s.loInc {
		next, ok := bump(rs.lo, levelPatch)
		if !ok {
			return rs, false
		}
		rs.lo = next.tuple()
	}
	if s.hasHi {
		rs.hi, rs.hasHi = s.hi.tuple(), true
		if !s.hi.IsPrerelease() && s.hiInc {
			next, ok := bump(rs.hi, levelPatch)
			rs.hi, rs.hasHi = next.tuple(), ok
		}
	}
	if rs.hasHi && compareTuple(rs.lo, rs.hi) >= 0 {
		return rs, false
	}
	return rs, true
}

// mergeReleaseSpans sorts spans and joins those that overlap or touch.
func mergeReleaseSpans(spans []releaseSpan) []releaseSpan {
	slices.SortFunc(spans, func(a, b releaseSpan) int { return compareTuple(a.lo, b.lo) })
	var merged []releaseSpan
	for _, sp := range spans {
		if n := len(merged); n > 0 {
			last := &merged[n-1]
			if !last.hasHi || compareTuple(sp.lo, last.hi) <= 0 {
				if !sp.hasHi || last.hasHi && compareTuple(sp.hi, last.hi) > 0 {
					last.hi, last.hasHi = sp.hi, sp.hasHi
				}
				continue
			}
		}
		merged = append(merged, sp)
	}
	return merged
}

// coveredBy reports whether one of the merged spans holds all of rs.
func (rs releaseSpan) coveredBy(merged []releaseSpan) bool {
	for _, m := range merged {
		if compareTuple(m.lo, rs.lo) > 0 {
			continue
		}
		if !m.hasHi || rs.hasHi && compareTuple(rs.hi, m.hi) <= 0 {
			return true
		}
	}
	return false
}

// preSpan is a span of pre-releases of one tuple, taken as a dense interval:
// that may miss that two spans join (nothing lies between 1.0.0-a and
// 1.0.0-a.0), which only makes Subset answer false where it could say true.
type preSpan struct {
	lo, hi       Version
	loInc, hiInc bool
}

// preSpan returns the pre-releases of t within s's bounds, and false when
// there are none; it does not check that s admits pre-releases of t.
func (s interval) preSpan(t tuple) (preSpan, bool) {
	lowest := Version{Major: t[0], Minor: t[1], Patch: t[2], Pre: minVersion.Pre}
	release := Version{Major: t[0], Minor: t[1], Patch: t[2]}
	sp := preSpan{lo: s.lo, loInc: s.loInc, hi: release}
	if s.lo.Compare(lowest) < 0 {
		sp.lo, sp.loInc = lowest, true
	}
	if s.hasHi && s.hi.Compare(release) < 0 {
		sp.hi, sp.hiInc = s.hi, s.hiInc
	}
	if c := sp.lo.Compare(sp.hi); c > 0 || c == 0 && !(sp.loInc && sp.hiInc) {
		return sp, false
	}
	return sp, true
}

// mergePreSpans sorts spans and joins those that overlap or touch.
func mergePreSpans(spans []preSpan) []preSpan {
	slices.SortFunc(spans, func(a, b preSpan) int {
		if c := a.lo.Compare(b.lo); c != 0 {
			return c
		}
		switch {
		case a.loInc == b.loInc:
			return 0
		case a.loInc:
			return -1
		}
		return 1
	})
	var merged []preSpan
	for _, sp := range spans {
		if n := len(merged); n > 0 {
			last := &merged[n-1]
			if c := sp.lo.Compare(last.hi); c < 0 || c == 0 && (sp.loInc || last.hiInc) {
				switch c := sp.hi.Compare(last.hi); {
				case c > 0:
					last.hi, last.hiInc = sp.hi, sp.hiInc
				case c == 0:
					last.hiInc = last.hiInc || sp.hiInc
				}
				continue
			}
		}
		merged = append(merged, sp)
	}
	return merged
}

// coveredBy reports whether one of the merged spans holds all of sp.
func (sp preSpan) coveredBy(merged []preSpan) bool {
	for _, m := range merged {
		lo := m.lo.Compare(sp.lo)
		hi := sp.hi.Compare(m.hi)
		if (lo < 0 || lo == 0 && (m.loInc || !sp.loInc)) && (hi < 0 || hi == 0 && (m.hiInc || !sp.hiInc)) {
			return true
		}
	}
	return false
}
