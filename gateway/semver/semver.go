package semver

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Version is a semantic version as defined by SemVer 2.0.0.
type Version struct {
	Major, Minor, Patch uint64   // the numeric parts
	Pre                 []string // pre-release identifiers, empty for a release
	Build               string   // build metadata, ignored by Compare
}

// ParseVersion parses a strict SemVer 2.0.0 version, MAJOR.MINOR.PATCH[-pre][+build].
func ParseVersion(s string) (Version, error) {
	v, err := parseVersion(s)
	if err != nil {
		return Version{}, fmt.Errorf("invalid version %q: %w", s, err)
	}
	return v, nil
}

// parseVersion parses s and returns an error that does not repeat s.
func parseVersion(s string) (Version, error) {
	var v Version
	if s == "" {
		return v, errors.New("empty")
	}
	if s[0] == 'v' || s[0] == 'V' {
		return v, fmt.Errorf("a leading %q is not allowed", s[:1])
	}
	rest := s
	if i := strings.IndexByte(rest, '+'); i >= 0 {
		build := rest[i+1:]
		if err := checkIdentifiers("build", build, false); err != nil {
			return v, err
		}
		v.Build, rest = build, rest[:i]
	}
	if i := strings.IndexByte(rest, '-'); i >= 0 {
		pre := rest[i+1:]
		if err := checkIdentifiers("pre-release", pre, true); err != nil {
			return v, err
		}
		v.Pre, rest = strings.Split(pre, "."), rest[:i]
	}
	parts := strings.Split(rest, ".")
	if len(parts) != 3 {
		return v, fmt.Errorf("want MAJOR.MINOR.PATCH, got %d part(s) in %q", len(parts), rest)
	}
	nums := [3]*uint64{&v.Major, &v.Minor, &v.Patch}
	for i, p := range parts {
		n, err := parseNumber(versionPartNames[i], p)
		if err != nil {
			return v, err
		}
		*nums[i] = n
	}
	return v, nil
}

// versionPartNames names the three numeric parts of a version in errors.
var versionPartNames = [3]string{"major", "minor", "patch"}

// parseNumber parses a numeric version part: digits only, no leading zero, at most 2^64-1.
func parseNumber(what, s string) (uint64, error) {
	if s == "" {
		return 0, fmt.Errorf("empty %s", what)
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, fmt.Errorf("%s %q is not a number", what, s)
		}
	}
	if len(s) > 1 && s[0] == '0' {
		return 0, fmt.Errorf("%s %q has a leading zero", what, s)
	}
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%s %q is too large", what, s)
	}
	return n, nil
}

// checkIdentifiers checks dot-separated pre-release or build identifiers.
func checkIdentifiers(what, s string, noLeadingZero bool) error {
	if s == "" {
		return fmt.Errorf("empty %s", what)
	}
	for _, id := range strings.Split(s, ".") {
		if id == "" {
			return fmt.Errorf("empty %s identifier in %q", what, s)
		}
		numeric := true
		for i := 0; i < len(id); i++ {
			c := id[i]
			switch {
			case c >= '0' && c <= '9':
			case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c == '-':
				numeric = false
			default:
				return fmt.Errorf("%s identifier %q has a character outside [0-9A-Za-z-]", what, id)
			}
		}
		if noLeadingZero && numeric && len(id) > 1 && id[0] == '0' {
			return fmt.Errorf("%s identifier %q has a leading zero", what, id)
		}
	}
	return nil
}

// String formats v as MAJOR.MINOR.PATCH[-pre][+build].
func (v Version) String() string {
	var b strings.Builder
	b.WriteString(strconv.FormatUint(v.Major, 10))
	b.WriteByte('.')
	b.WriteString(strconv.FormatUint(v.Minor, 10))
	b.WriteByte('.')
	b.WriteString(strconv.FormatUint(v.Patch, 10))
	if len(v.Pre) > 0 {
		b.WriteByte('-')
		b.WriteString(strings.Join(v.Pre, "."))
	}
	if v.Build != "" {
		b.WriteByte('+')
		b.WriteString(v.Build)
	}
	return b.String()
}

// IsPrerelease reports whether v has pre-release identifiers.
func (v Version) IsPrerelease() bool { return len(v.Pre) > 0 }

// Compare returns -1, 0 or +1 as v has lower, equal or higher precedence than o; build metadata is ignored.
func (v Version) Compare(o Version) int {
	if c := compareUint(v.Major, o.Major); c != 0 {
		return c
	}
	if c := compareUint(v.Minor, o.Minor); c != 0 {
		return c
	}
	if c := compareUint(v.Patch, o.Patch); c != 0 {
		return c
	}
	// A release has higher precedence than any of its pre-releases.
	switch {
	case len(v.Pre) == 0 && len(o.Pre) == 0:
		return 0
	case len(v.Pre) == 0:
		return 1
	case len(o.Pre) == 0:
		return -1
	}
	for i := 0; i < len(v.Pre) && i < len(o.Pre); i++ {
		if c := compareIdentifier(v.Pre[i], o.Pre[i]); c != 0 {
			return c
		}
	}
	return compareUint(uint64(len(v.Pre)), uint64(len(o.Pre)))
}

// MarshalText returns v.String(), so a Version can sit in JSON or YAML documents.
func (v Version) MarshalText() ([]byte, error) { return []byte(v.String()), nil }

// UnmarshalText parses text with ParseVersion.
func (v *Version) UnmarshalText(text []byte) error {
	p, err := ParseVersion(string(text))
	if err != nil {
		return err
	}
	*v = p
	return nil
}

// tuple returns the MAJOR.MINOR.PATCH of v.
func (v Version) tuple() tuple { return tuple{v.Major, v.Minor, v.Patch} }

// tuple is a MAJOR.MINOR.PATCH triple.
type tuple [3]uint64

func compareUint(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// compareIdentifier orders two pre-release identifiers: numeric ones
// numerically and below alphanumeric ones, alphanumeric ones in ASCII order.
func compareIdentifier(a, b string) int {
	an, bn := isNumeric(a), isNumeric(b)
	switch {
	case an && bn:
		// Numeric identifiers may exceed 64 bits: compare them as digit strings.
		a, b = strings.TrimLeft(a, "0"), strings.TrimLeft(b, "0")
		if c := compareUint(uint64(len(a)), uint64(len(b))); c != 0 {
			return c
		}
		return strings.Compare(a, b)
	case an:
		return -1
	case bn:
		return 1
	}
	return strings.Compare(a, b)
}

func isNumeric(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}
