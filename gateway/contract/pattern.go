package contract

import (
	"errors"
	"fmt"
	"strings"

	"holon.dev/holon/gateway/semver"
)

// AgentRef names an agent, ns/name, optionally with a version range after "@".
type AgentRef struct {
	NS, Name string        // the account handle and the agent's name
	Range    *semver.Range // nil when the reference has no "@"
	Raw      string        // the reference as written
}

// ParseAgentRef parses "ns/name", "ns/name@1.2.3" or "ns/name@<range>".
func ParseAgentRef(s string) (AgentRef, error) {
	ref, err := parseAgentRef(s)
	if err != nil {
		return AgentRef{}, fmt.Errorf("invalid agent reference %q: %w", s, err)
	}
	return ref, nil
}

func parseAgentRef(s string) (AgentRef, error) {
	id, text, hasRange := strings.Cut(s, "@")
	ns, name, err := splitAgentID(id)
	if err != nil {
		return AgentRef{}, err
	}
	ref := AgentRef{NS: ns, Name: name, Raw: s}
	if hasRange {
		if strings.TrimSpace(text) == "" {
			// ParseRange reads "" as any version: refuse it here, where it is surely a slip.
			return AgentRef{}, errors.New(`empty range after "@"`)
		}
		r, err := semver.ParseRange(text)
		if err != nil {
			return AgentRef{}, err
		}
		ref.Range = &r
	}
	return ref, nil
}

// splitAgentID splits "ns/name" and checks both parts.
func splitAgentID(id string) (ns, name string, err error) {
	ns, name, ok := strings.Cut(id, "/")
	if !ok {
		return "", "", fmt.Errorf("%q is not ns/name", id)
	}
	if !ValidHandle(ns) {
		return "", "", fmt.Errorf("namespace %q is not a handle (2 to 39 lowercase letters, digits and single hyphens, no hyphen at either end)", ns)
	}
	if !ValidAgentName(name) {
		return "", "", fmt.Errorf("agent name %q is not 1 to 64 lowercase letters, digits, '-' and '_'", name)
	}
	return ns, name, nil
}

// ID returns "ns/name", the reference without its range.
func (r AgentRef) ID() string { return r.NS + "/" + r.Name }

// String returns the reference as it was written.
func (r AgentRef) String() string { return r.Raw }

// MarshalText returns the reference as it was written.
func (r AgentRef) MarshalText() ([]byte, error) { return []byte(r.Raw), nil }

// UnmarshalText parses text with ParseAgentRef.
func (r *AgentRef) UnmarshalText(text []byte) error {
	p, err := ParseAgentRef(string(text))
	if err != nil {
		return err
	}
	*r = p
	return nil
}

// ValidHandle reports whether s is an account handle: 2 to 39 lowercase
// letters, digits and single hyphens, not starting or ending with a hyphen.
func ValidHandle(s string) bool {
	if len(s) < 2 || len(s) > 39 || s[0] == '-' || s[len(s)-1] == '-' || strings.Contains(s, "--") {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !isLowerAlnum(c) && c != '-' {
			return false
		}
	}
	return true
}

// ValidAgentName reports whether s is an agent name: 1 to 64 lowercase letters, digits, '-' and '_'.
func ValidAgentName(s string) bool {
	if len(s) < 1 || len(s) > 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !isLowerAlnum(c) && c != '-' && c != '_' {
			return false
		}
	}
	return true
}

func isLowerAlnum(c byte) bool { return c >= 'a' && c <= 'z' || c >= '0' && c <= '9' }

// patternKind says what a pattern matches. The zero kind belongs to the zero
// pattern, which matches and covers nothing, so a forgotten field never
// grants anything.
type patternKind uint8

const (
	patternNothing patternKind = iota
	patternAll                 // "*"
	patternPrefix              // "ns/*" or "a.*"
	patternExact               // "ns/name[@range]" or "a.b"
)

// AgentPattern is a mandate's agent pattern: "*", "ns/*", "ns/name" or "ns/name@<range>".
type AgentPattern struct {
	raw  string
	kind patternKind
	ns   string
	name string
	rng  *semver.Range // nil for any version, pre-releases included
}

// ParseAgentPattern parses "*", "ns/*", "ns/name" or "ns/name@<range>".
func ParseAgentPattern(s string) (AgentPattern, error) {
	p, err := parseAgentPattern(s)
	if err != nil {
		return AgentPattern{}, fmt.Errorf("invalid agent pattern %q: %w", s, err)
	}
	return p, nil
}

func parseAgentPattern(s string) (AgentPattern, error) {
	if s == "*" {
		return AgentPattern{raw: s, kind: patternAll}, nil
	}
	if ns, rest, ok := strings.Cut(s, "/"); ok && strings.HasPrefix(rest, "*") {
		if rest != "*" {
			return AgentPattern{}, errors.New(`"ns/*" takes no range or suffix: a range needs a single agent`)
		}
		if !ValidHandle(ns) {
			return AgentPattern{}, fmt.Errorf("namespace %q is not a handle (2 to 39 lowercase letters, digits and single hyphens, no hyphen at either end)", ns)
		}
		return AgentPattern{raw: s, kind: patternPrefix, ns: ns}, nil
	}
	ref, err := parseAgentRef(s)
	if err != nil {
		return AgentPattern{}, err
	}
	return AgentPattern{raw: s, kind: patternExact, ns: ref.NS, name: ref.Name, rng: ref.Range}, nil
}

// String returns the pattern as it was written.
func (p AgentPattern) String() string { return p.raw }

// MarshalText returns the pattern as it was written.
func (p AgentPattern) MarshalText() ([]byte, error) { return []byte(p.raw), nil }

// UnmarshalText parses text with ParseAgentPattern.
func (p *AgentPattern) UnmarshalText(text []byte) error {
	q, err := ParseAgentPattern(string(text))
	if err != nil {
		return err
	}
	*p = q
	return nil
}

// Match reports whether the agent id ("ns/name") at version v matches the
// pattern; a pattern without a range matches every version, pre-releases included.
func (p AgentPattern) Match(id string, v semver.Version) bool {
	ns, name, err := splitAgentID(id)
	if err != nil {
		return false
	}
	switch p.kind {
	case patternAll:
		return true
	case patternPrefix:
		return ns == p.ns
	case patternExact:
		return ns == p.ns && name == p.name && (p.rng == nil || p.rng.Contains(v))
	}
	return false
}

// Covers reports whether every agent version that child matches is matched by p.
func (p AgentPattern) Covers(child AgentPattern) bool {
	if child.kind == patternNothing {
		return false
	}
	switch p.kind {
	case patternAll:
		return true
	case patternPrefix:
		return child.kind != patternAll && child.ns == p.ns
	case patternExact:
		if child.kind != patternExact || child.ns != p.ns || child.name != p.name {
			return false
		}
		// A range never admits every pre-release, so only a rangeless pattern
		// covers a rangeless child.
		return p.rng == nil || child.rng != nil && child.rng.Subset(*p.rng)
	}
	return false
}

// CapabilityPattern is a mandate's capability pattern: "*", an exact
// capability "a.b", or "a.*" for every capability under "a.".
type CapabilityPattern struct {
	raw   string
	kind  patternKind
	value string // the capability, or for a prefix pattern its prefix with the dot ("a.")
}

// ValidCapability reports whether s is a capability: dot-separated segments of
// lowercase letters, digits, '-' and '_', a single segment ("search") included.
func ValidCapability(s string) bool { return checkCapability(s) == nil }

func checkCapability(s string) error {
	if s == "" {
		return errors.New("empty capability")
	}
	for seg := range strings.SplitSeq(s, ".") {
		if seg == "" {
			return fmt.Errorf("capability %q has an empty segment", s)
		}
		for i := 0; i < len(seg); i++ {
			if c := seg[i]; !isLowerAlnum(c) && c != '-' && c != '_' {
				return fmt.Errorf("capability %q has %q, not a lowercase letter, digit, '-' or '_'", s, c)
			}
		}
	}
	return nil
}

// ParseCapabilityPattern parses "*", "a.b" or "a.*".
func ParseCapabilityPattern(s string) (CapabilityPattern, error) {
	p, err := parseCapabilityPattern(s)
	if err != nil {
		return CapabilityPattern{}, fmt.Errorf("invalid capability pattern %q: %w", s, err)
	}
	return p, nil
}

func parseCapabilityPattern(s string) (CapabilityPattern, error) {
	if s == "*" {
		return CapabilityPattern{raw: s, kind: patternAll}, nil
	}
	if prefix, ok := strings.CutSuffix(s, ".*"); ok {
		if err := checkCapability(prefix); err != nil {
			return CapabilityPattern{}, err
		}
		return CapabilityPattern{raw: s, kind: patternPrefix, value: prefix + "."}, nil
	}
	if strings.Contains(s, "*") {
		return CapabilityPattern{}, errors.New(`"*" may only be the whole pattern or its last segment ("a.*")`)
	}
	if err := checkCapability(s); err != nil {
		return CapabilityPattern{}, err
	}
	return CapabilityPattern{raw: s, kind: patternExact, value: s}, nil
}

// String returns the pattern as it was written.
func (p CapabilityPattern) String() string { return p.raw }

// MarshalText returns the pattern as it was written.
func (p CapabilityPattern) MarshalText() ([]byte, error) { return []byte(p.raw), nil }

// UnmarshalText parses text with ParseCapabilityPattern.
func (p *CapabilityPattern) UnmarshalText(text []byte) error {
	q, err := ParseCapabilityPattern(string(text))
	if err != nil {
		return err
	}
	*p = q
	return nil
}

// Match reports whether the capability matches the pattern; an invalid capability matches nothing.
func (p CapabilityPattern) Match(capability string) bool {
	if !ValidCapability(capability) {
		return false
	}
	switch p.kind {
	case patternAll:
		return true
	case patternPrefix:
		return strings.HasPrefix(capability, p.value)
	case patternExact:
		return capability == p.value
	}
	return false
}

// Covers reports whether every capability that child matches is matched by p.
func (p CapabilityPattern) Covers(child CapabilityPattern) bool {
	if child.kind == patternNothing {
		return false
	}
	switch p.kind {
	case patternAll:
		return true
	case patternPrefix:
		return child.kind != patternAll && strings.HasPrefix(child.value, p.value)
	case patternExact:
		return child.kind == patternExact && child.value == p.value
	}
	return false
}
