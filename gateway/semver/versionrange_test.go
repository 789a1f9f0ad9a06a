package semver_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"holon.dev/holon/gateway/semver"
)

// mustRange parses s or fails the test.
func mustRange(tb testing.TB, s string) semver.Range {
	tb.Helper()
	r, err := semver.ParseRange(s)
	if err != nil {
		tb.Fatal(err)
	}
	return r
}

// Ensure that every operator, partial, caret, tilde, x-range, hyphen range
// and union admits exactly the versions npm's semver admits.
func TestRange_Contains(t *testing.T) {
	const max = "18446744073709551615"
	for _, tt := range []struct {
		rng     string
		in, out []string
	}{
		// Exact versions.
		{"1.2.3", []string{"1.2.3", "1.2.3+build.7"}, []string{"1.2.2", "1.2.4", "1.2.3-beta", "0.0.0"}},
		{"=1.2.3", []string{"1.2.3"}, []string{"1.2.4", "1.2.3-beta"}},
		{"1.2.3-beta.1", []string{"1.2.3-beta.1"}, []string{"1.2.3-beta.2", "1.2.3", "1.2.3-beta"}},
		{"1.2.3+build", []string{"1.2.3", "1.2.3+other"}, []string{"1.2.4"}},

		// Comparison operators on full versions.
		{">1.2.3", []string{"1.2.4", "2.0.0"}, []string{"1.2.3", "1.0.0", "1.2.4-alpha", "2.0.0-rc.1"}},
		{">=1.2.3", []string{"1.2.3", "9.0.0"}, []string{"1.2.2", "1.2.3-rc.1", "2.0.0-rc.1"}},
		{"<1.2.3", []string{"1.2.2", "0.0.0", "1.1.99"}, []string{"1.2.3", "1.2.3-beta", "0.1.0-alpha"}},
		{"<=1.2.3", []string{"1.2.3", "0.0.1"}, []string{"1.2.4", "1.2.3-beta"}},
		{">1.2.3-beta", []string{"1.2.3-beta.1", "1.2.3-rc", "1.2.3", "1.3.0"}, []string{"1.2.3-beta", "1.2.3-alpha", "1.3.0-beta"}},
		{">=1.2.3-beta", []string{"1.2.3-beta", "1.2.3-beta.0", "1.2.3"}, []string{"1.2.3-alpha", "1.2.4-beta"}},
		{"<1.2.3-beta", []string{"1.2.3-alpha", "1.2.3-0", "1.2.2"}, []string{"1.2.3-beta", "1.2.3", "1.2.2-x"}},
		{"<=1.2.3-beta", []string{"1.2.3-beta", "1.2.3-alpha"}, []string{"1.2.3-beta.1", "1.2.3"}},

		// Partial versions and x-ranges.
		{"1", []string{"1.0.0", "1.9.9"}, []string{"0.9.9", "2.0.0", "1.5.0-beta", "2.0.0-0"}},
		{"1.x", []string{"1.0.0", "1.9.9"}, []string{"0.9.9", "2.0.0"}},
		{"1.X", []string{"1.0.0", "1.9.9"}, []string{"0.9.9", "2.0.0"}},
		{"1.*", []string{"1.0.0", "1.9.9"}, []string{"0.9.9", "2.0.0"}},
		{"1.x.x", []string{"1.0.0", "1.9.9"}, []string{"0.9.9", "2.0.0"}},
		{"=1", []string{"1.0.0", "1.9.9"}, []string{"0.9.9", "2.0.0"}},
		{"1.2", []string{"1.2.0", "1.2.99"}, []string{"1.1.9", "1.3.0", "1.2.5-rc"}},
		{"1.2.x", []string{"1.2.0", "1.2.99"}, []string{"1.1.9", "1.3.0"}},
		{"0", []string{"0.0.0", "0.9.9"}, []string{"1.0.0"}},
		{"*", []string{"0.0.0", "1.2.3", max + ".0.0"}, []string{"1.0.0-beta", "0.0.0-0"}},
		{"x", []string{"0.0.0", "1.2.3"}, []string{"1.0.0-beta"}},
		{"X", []string{"0.0.0", "1.2.3"}, []string{"1.0.0-beta"}},
		{"", []string{"0.0.0", "1.2.3"}, []string{"1.0.0-beta"}},
		{"  ", []string{"0.0.0", "1.2.3"}, []string{"1.0.0-beta"}},
		{"x.x.x", []string{"0.0.0", "1.2.3"}, []string{"1.0.0-beta"}},

		// Comparison operators on partial versions.
		{">1", []string{"2.0.0", "3.1.4"}, []string{"1.9.9", "2.0.0-beta"}},
		{">1.2", []string{"1.3.0", "2.0.0"}, []string{"1.2.9"}},
		{">1.x", []string{"2.0.0"}, []string{"1.9.9"}},
		{">=1", []string{"1.0.0", "5.0.0"}, []string{"0.9.9", "1.0.0-rc.1"}},
		{">=1.2", []string{"1.2.0"}, []string{"1.1.9"}},
		{"<1", []string{"0.9.9", "0.0.0"}, []string{"1.0.0", "1.0.0-0"}},
		{"<1.2", []string{"1.1.9"}, []string{"1.2.0", "1.2.0-0"}},
		{"<=1", []string{"1.9.9", "0.0.0"}, []string{"2.0.0", "2.0.0-0"}},
		{"<=1.2", []string{"1.2.9"}, []string{"1.3.0"}},
		{">*", nil, []string{"0.0.0", "1.0.0"}},
		{"<*", nil, []string{"0.0.0", "1.0.0"}},
		{">=*", []string{"0.0.0", "1.0.0"}, []string{"1.0.0-0"}},
		{"<=*", []string{"0.0.0", "1.0.0"}, nil},
		{"=*", []string{"0.0.0", "1.0.0"}, nil},
		{"<0", nil, []string{"0.0.0", "0.0.0-0"}},
		{"<0.0.0", nil, []string{"0.0.0", "0.0.0-0"}},
		{">" + max, nil, []string{max + ".0.0", max + "." + max + "." + max}},
		{"<=" + max + "." + max + "." + max, []string{max + "." + max + "." + max, "0.0.0"}, nil},

		// Carets.
		{"^1", []string{"1.0.0", "1.9.9"}, []string{"0.9.0", "2.0.0", "2.0.0-0"}},
		{"^1.x", []string{"1.0.0", "1.9.9"}, []string{"0.9.0", "2.0.0"}},
		{"^1.2", []string{"1.2.0", "1.99.0"}, []string{"1.1.9", "2.0.0"}},
		{"^1.2.x", []string{"1.2.0", "1.99.0"}, []string{"1.1.9", "2.0.0"}},
		{"^1.2.3", []string{"1.2.3", "1.9.0"}, []string{"1.2.2", "2.0.0", "1.2.4-beta", "2.0.0-0"}},
		{"^0.2.3", []string{"0.2.3", "0.2.9"}, []string{"0.2.2", "0.3.0", "1.0.0"}},
		{"^0.2", []string{"0.2.0", "0.2.9"}, []string{"0.1.9", "0.3.0"}},
		{"^0.0.3", []string{"0.0.3"}, []string{"0.0.2", "0.0.4", "0.1.0"}},
		{"^0.0.0", []string{"0.0.0"}, []string{"0.0.1"}},
		{"^0.0", []string{"0.0.0", "0.0.9"}, []string{"0.1.0"}},
		{"^0.0.x", []string{"0.0.0", "0.0.9"}, []string{"0.1.0"}},
		{"^0", []string{"0.0.0", "0.9.9"}, []string{"1.0.0"}},
		{"^0.x", []string{"0.0.0", "0.9.9"}, []string{"1.0.0"}},
		{"^*", []string{"0.0.0", "7.0.0"}, []string{"7.0.0-rc"}},
		{"^1.2.3-beta.1", []string{"1.2.3-beta.1", "1.2.3-beta.2", "1.2.3", "1.2.4", "1.9.9"}, []string{"1.2.4-alpha", "1.2.3-alpha", "1.2.3-beta.0", "2.0.0-0", "2.0.0"}},
		{"^0.0.3-beta", []string{"0.0.3-beta", "0.0.3-pr.2", "0.0.3"}, []string{"0.0.4", "0.0.4-0", "0.0.3-alpha"}},
		{"^0.2.3-rc.1", []string{"0.2.3-rc.1", "0.2.3", "0.2.9"}, []string{"0.3.0", "0.2.4-rc.1"}},
		{"^ 1.2", []string{"1.2.0"}, []string{"2.0.0"}},
		{"^" + max, []string{max + ".0.0", max + ".5.5"}, []string{"18446744073709551614.0.0"}},
		{"^0.0." + max, []string{"0.0." + max}, []string{"0.1.0", "0.0.0"}},

		// Tildes.
		{"~1", []string{"1.0.0", "1.9.9"}, []string{"0.9.9", "2.0.0"}},
		{"~1.x", []string{"1.0.0", "1.9.9"}, []string{"2.0.0"}},
		{"~1.2", []string{"1.2.0", "1.2.9"}, []string{"1.1.9", "1.3.0"}},
		{"~1.2.3", []string{"1.2.3", "1.2.9"}, []string{"1.2.2", "1.3.0", "1.3.0-0"}},
		{"~0.2.3", []string{"0.2.3", "0.2.9"}, []string{"0.3.0"}},
		{"~0", []string{"0.0.0", "0.9.0"}, []string{"1.0.0"}},
		{"~0.0", []string{"0.0.0", "0.0.9"}, []string{"0.1.0"}},
		{"~1.2.3-beta.2", []string{"1.2.3-beta.2", "1.2.3-beta.4", "1.2.3", "1.2.9"}, []string{"1.2.3-beta.1", "1.2.4-beta.2", "1.3.0"}},
		{"~*", []string{"0.0.0", "1.0.0"}, nil},
		{"~ 1.2", []string{"1.2.0"}, []string{"1.3.0"}},

		// Space-separated intersections.
		{">=1.2.3 <2", []string{"1.2.3", "1.9.9"}, []string{"1.2.2", "2.0.0"}},
		{">= 1.2.3 < 2", []string{"1.2.3", "1.9.9"}, []string{"1.2.2", "2.0.0"}},
		{">=1.0.0 <2.0.0 >=1.5.0", []string{"1.5.0", "1.9.0"}, []string{"1.4.9", "2.0.0"}},
		{">1.0.0 <=1.0.0", nil, []string{"1.0.0", "1.0.1", "0.9.9"}},
		{">2 <1", nil, []string{"1.5.0", "0.0.0", "3.0.0"}},
		{"^1 ~1.4", []string{"1.4.0", "1.4.7"}, []string{"1.3.9", "1.5.0"}},
		{">=1.2.3-alpha <1.2.3-beta", []string{"1.2.3-alpha", "1.2.3-alpha.9"}, []string{"1.2.3-beta", "1.2.3", "1.2.2"}},
		{">=1.0.0-rc.1 <2.0.0-rc.1", []string{"1.0.0-rc.1", "1.0.0", "1.5.0", "2.0.0-beta"}, []string{"1.5.0-rc.1", "2.0.0-rc.1", "2.0.0"}},

		// Hyphen ranges.
		{"1.2.3 - 2.3.4", []string{"1.2.3", "2.0.0", "2.3.4"}, []string{"1.2.2", "2.3.5", "2.3.4-beta"}},
		{"1.2 - 2.3.4", []string{"1.2.0", "2.3.4"}, []string{"1.1.9", "2.3.5"}},
		{"1.2.3 - 2.3", []string{"1.2.3", "2.3.9"}, []string{"2.4.0", "2.4.0-0"}},
		{"1.2.3 - 2", []string{"1.2.3", "2.9.9"}, []string{"1.2.2", "3.0.0"}},
		{"* - 2", []string{"0.0.0", "2.9.9"}, []string{"3.0.0"}},
		{"1 - *", []string{"1.0.0", "99.0.0"}, []string{"0.9.9"}},
		{"1.2.3-alpha - 2.0.0-beta", []string{"1.2.3-alpha", "1.2.3-beta", "1.5.0", "2.0.0-alpha", "2.0.0-beta"}, []string{"1.2.3-0", "1.5.0-alpha", "2.0.0-beta.1", "2.0.0"}},

		// Unions: the pre-release rule holds set by set.
		{"^1 || ^3", []string{"1.2.0", "3.0.0"}, []string{"0.9.0", "2.0.0", "4.0.0"}},
		{"1.2.3 || >=2.0.0 <2.1.0", []string{"1.2.3", "2.0.5"}, []string{"1.2.4", "2.1.0"}},
		{"1.x || >=2.5.0 || 5.0.0 - 7.2.3", []string{"1.2.3", "2.5.0", "3.0.0", "7.2.3"}, []string{"0.9.0", "2.4.0"}},
		{"^2.0.0-rc.1 || ^1", []string{"2.0.0-rc.2", "1.5.0", "2.3.0"}, []string{"1.5.0-rc.1", "2.0.0-beta"}},
		{"^1.2.3-beta||^2", []string{"1.2.3-beta.5", "2.1.0"}, []string{"2.0.0-alpha", "1.2.4-beta"}},
		{"<1 || >=2 <3 || 7", []string{"0.5.0", "2.5.0", "7.1.0"}, []string{"1.0.0", "3.0.0", "6.9.9"}},
	} {
		t.Run(tt.rng, func(t *testing.T) {
			r := mustRange(t, tt.rng)
			for _, v := range tt.in {
				if !r.Contains(mustVersion(t, v)) {
					t.Errorf("%q does not contain %s", tt.rng, v)
				}
			}
			for _, v := range tt.out {
				if r.Contains(mustVersion(t, v)) {
					t.Errorf("%q contains %s", tt.rng, v)
				}
			}
		})
	}
}

// Ensure that the zero Range behaves as the empty range "", which admits every release.
func TestRange_Zero(t *testing.T) {
	var r semver.Range
	if !r.Contains(mustVersion(t, "1.2.3")) || r.Contains(mustVersion(t, "1.2.3-rc.1")) {
		t.Fatal("zero Range is not the empty range")
	}
	if !r.Subset(mustRange(t, "*")) || !mustRange(t, "*").Subset(r) {
		t.Fatal("zero Range is not equivalent to *")
	}
}

// Ensure that malformed ranges are refused with an error that names the range and what is wrong.
func TestParseRange_Invalid(t *testing.T) {
	for _, tt := range []struct{ in, err string }{
		{"^1.2.x.4", `invalid range "^1.2.x.4": version "1.2.x.4" has more than three parts`},
		{"1.2.3.4", `version "1.2.3.4" has more than three parts`},
		{"v1.2.3", `invalid range "v1.2.3": version "v1.2.3": a leading "v" is not allowed`},
		{">=v1", `a leading "v" is not allowed`},
		{"01.2.3", `major "01" has a leading zero`},
		{"^1.02", `minor "02" has a leading zero`},
		{"1.x.3", `version "1.x.3" has a number after a wildcard`},
		{"*.1", `has a number after a wildcard`},
		{"1.2-beta", `version "1.2-beta": a pre-release or build needs a full MAJOR.MINOR.PATCH`},
		{"1.x+build", `a pre-release or build needs a full MAJOR.MINOR.PATCH`},
		{"1.2.3-", `empty pre-release`},
		{"1.2.3-01", `pre-release identifier "01" has a leading zero`},
		{"1.2.3+", `empty build`},
		{"a.b.c", `major "a" is not a number`},
		{"1.2.", `empty patch`},
		{"99999999999999999999", `major "99999999999999999999" is too large`},
		{">=", `operator ">=" without a version`},
		{"1.0.0 <", `operator "<" without a version`},
		{">=<1", `operator ">=" followed by operator "<"`},
		{">= >=1", `operator ">=" followed by operator ">="`},
		{"~>1.2", `operator "~" followed by operator ">"`},
		{"^~1", `operator "^" followed by operator "~"`},
		{"!=1.2.3", `major "!=1" is not a number`},
		{"1 | 2", `major "|" is not a number`},
		{"1.2.3 -", `a hyphen range must be "A - B"`},
		{"- 1.2.3", `a hyphen range must be "A - B"`},
		{"1 - 2 - 3", `a hyphen range must be "A - B"`},
		{"1 2 - 3", `a hyphen range must be "A - B"`},
		{">1 - 2", `operator ">" in a hyphen range`},
		{"1 - ^2", `operator "^" in a hyphen range`},
		{"1.2.3 -2.3.4", `version "-2.3.4": empty major`},
		{"^1 ||", `empty comparator set beside "||"`},
		{"|| ^1", `empty comparator set beside "||"`},
		{"^1 || || ^2", `empty comparator set beside "||"`},
		{"^1 ||| ^2", `major "|" is not a number`},
	} {
		t.Run(tt.in, func(t *testing.T) {
			_, err := semver.ParseRange(tt.in)
			if err == nil {
				t.Fatal("expected an error")
			}
			if !strings.HasPrefix(err.Error(), fmt.Sprintf("invalid range %q: ", tt.in)) {
				t.Errorf("error %q does not name the range", err)
			}
			if !strings.Contains(err.Error(), tt.err) {
				t.Errorf("error %q does not contain %q", err, tt.err)
			}
		})
	}
}

// Ensure that Subset decides containment between ranges, both ways, exactly for releases.
func TestRange_Subset(t *testing.T) {
	for _, tt := range []struct {
		sub, of string
		want    bool
	}{
		// Carets and tildes within wider ones.
		{"^1.2", "^1", true},
		{"^1", "^1.2", false},
		{">=1", "^1", false},
		{"^1", ">=1", true},
		{"^1", "^1", true},
		{"1.2.3", "^1", true},
		{"2.0.0", "^1", false},
		{"~1.2.3", "^1.2", true},
		{"^1.2", "~1.2.3", false},
		{"^0.2.3", "^0.2", true},
		{"^0.2", "^0.2.3", false},
		{"^0.2", "^0", true},
		{"^0.0.3", "~0.0.3", true},
		{"~0.0.3", "^0.0.3", false},
		{"^0.0.3", "^0.0", true},
		{"^0", "^0.0", false},
		{"*", "^1", false},
		{"^1", "*", true},
		{"*", "", true},
		{"", "*", true},
		{">=0.0.0", "*", true},
		{"*", ">=0.0.0", true},

		// Bounds: releases are discrete, so these pairs admit the same releases.
		{">=1.0.0 <2.0.0", "^1", true},
		{"^1", ">=1.0.0 <2.0.0", true},
		{"^1", "1.x", true},
		{"1.x", "^1", true},
		{">1.2.3", ">=1.2.4", true},
		{">=1.2.4", ">1.2.3", true},
		{"<=1.2.3", "<1.2.4", true},
		{"<1.2.4", "<=1.2.3", true},
		{"1.2.3 - 2.3.4", ">=1.2.3 <=2.3.4", true},
		{">=1.2.3 <=2.3.4", "1.2.3 - 2.3.4", true},
		{"1.2.3 - 2.3.4", ">=1.2.3 <2.3.4", false},
		{">=1.2.3 <2.3.5", ">=1.2.3 <=2.3.4", true},
		{"<=1.2.3", "<1.2.3", false},
		{">=1.2.3", ">1.2.3", false},
		{">1.2.3", "<1.2.3", false},

		// Unions on either side; touching intervals join.
		{"^1.5 || ^2", ">=1.0.0 <2.0.0 || >=2.0.0 <3.0.0", true},
		{"^1.5 || ^2", ">=2.0.0 <3.0.0 || >=1.0.0 <2.0.0", true},
		{"^1.5 || ^2", ">=1.0.0 <=1.9.9 || >=2.0.0 <3.0.0", false},
		{">=1.0.0 <3.0.0", "^1 || ^2", true},
		{"^1 || ^2", ">=1.0.0 <3.0.0", true},
		{">=1.0.0 <=1.9.9 || >=1.9.10 <2.0.0", "^1", true},
		{"^1", ">=1.0.0 <=1.9.9 || >=1.9.10 <2.0.0", true},
		{"^1", ">=1.0.0 <=1.9.9 || >=1.10.0 <2.0.0", false},
		{"^1", ">=1.0.0 <1.5.0 || >=1.5.0", true},
		{"^1", ">=1.0.0 <1.5.0 || >1.5.0", false},
		{"^1", ">=1.0.0 <=1.5.0 || >1.5.0 <2", true},
		{"1.2.3 || 2.0.0", "^1", false},
		{"1.2.3 || 1.5.0", "^1", true},
		{"^1 || ^3", "^1 || ^2 || ^3", true},
		{"^1 || ^2 || ^3", "^1 || ^3", false},
		{"<1 || >=2", "<1 || >=2", true},
		{"<1 || >=2", "*", true},
		{"*", "<1 || >=1", true},
		{"*", "<1 || >1", false},

		// Empty ranges are a subset of anything; nothing non-empty is a subset of them.
		{">2 <1", "1.2.3", true},
		{"<0.0.0", "1.2.3", true},
		{">*", "1.2.3", true},
		{"1.2.3", ">2 <1", false},
		{"<0", "<*", true},

		// Pre-releases: of must admit them too.
		{"^1.2.3-beta.1", "^1", false},
		{"^1", "^1.2.3-beta.1", false},
		{"^1.2.4", "^1.2.3-beta.1", true},
		{"^1.2.3-beta.1", "^1.2.3-beta.0", true},
		{"^1.2.3-beta.0", "^1.2.3-beta.1", false},
		{"1.2.3-beta.2", "^1.2.3-beta.1", true},
		{"1.2.3-beta.2", ">=1.2.3", false},
		{"1.2.3-beta.2 || 1.2.3-beta.3", ">=1.2.3-beta.2 <=1.2.3-beta.3", true},
		{">=1.2.3-alpha <1.2.3-beta", ">=1.2.3-alpha <1.2.3-alpha.5 || >=1.2.3-alpha.5 <1.2.3-beta", true},
		{">=1.2.3-alpha <1.2.3-beta", ">=1.2.3-alpha <1.2.3-alpha.5 || >1.2.3-alpha.5 <1.2.3-beta", false},
		{">=1.2.3-alpha <1.2.3-beta", ">=1.2.3-alpha <=1.2.3-alpha.5 || >1.2.3-alpha.5 <1.2.3-beta", true},
		{">=1.2.3-alpha <1.2.3-beta", ">=1.2.3-0 <1.2.3", true},
		{">=1.2.3-0 <1.2.3", ">=1.2.3-alpha <1.2.3-beta", false},
		{"^2.0.0-rc.1", "^2.0.0-rc.1 || ^1", true},
		{"^2.0.0-rc.1 || ^1", ">=1.0.0 <3.0.0", false},
		{"^2.0.0-rc.1 || ^1", ">=1.0.0 <3.0.0 || ^2.0.0-rc.0", true},
		{"^1.2.3-beta", "^1.2.3-beta.1 || ~1.2.3-beta", true},
		// The named pre-release sits outside its own set's bounds: nothing to admit.
		{">=1.2.4 <1.2.3-beta || ^1.2.4", "^1.2.4", true},

		// The highest versions there are.
		{"^18446744073709551615", ">=18446744073709551615.0.0", true},
		{">=18446744073709551615.0.0", "^18446744073709551615", true},
		{"<=18446744073709551615.18446744073709551615.18446744073709551615", "*", true},
		{"*", "<=18446744073709551615.18446744073709551615.18446744073709551615", true},
		{"*", "<18446744073709551615.18446744073709551615.18446744073709551615", false},
	} {
		t.Run(tt.sub+" in "+tt.of, func(t *testing.T) {
			if got := mustRange(t, tt.sub).Subset(mustRange(t, tt.of)); got != tt.want {
				t.Fatalf("%q.Subset(%q) = %v, want %v", tt.sub, tt.of, got, tt.want)
			}
		})
	}
}

// Ensure that Highest picks the highest contained version, pre-releases only when the range names one.
func TestHighest(t *testing.T) {
	var vs []semver.Version
	for _, s := range []string{"0.9.0", "1.0.0", "1.2.0", "1.3.0-beta", "2.0.0", "2.1.0-rc.1"} {
		vs = append(vs, mustVersion(t, s))
	}
	for _, tt := range []struct{ rng, want string }{
		{"^1", "1.2.0"},
		{"~1.0", "1.0.0"},
		{"^1.3.0-alpha", "1.3.0-beta"},
		{">=1.3.0-beta <2", "1.3.0-beta"},
		{"*", "2.0.0"},
		{"^2.1.0-rc.0", "2.1.0-rc.1"},
		{"0.x || 1.0.0", "1.0.0"},
		{"^3", ""},
		{"1.3.0", ""},
	} {
		t.Run(tt.rng, func(t *testing.T) {
			got, ok := semver.Highest(vs, mustRange(t, tt.rng))
			if tt.want == "" {
				if ok {
					t.Fatalf("got %s, want none", got)
				}
				return
			}
			if !ok || got.String() != tt.want {
				t.Fatalf("got %s, %v, want %s", got, ok, tt.want)
			}
		})
	}
	if _, ok := semver.Highest(nil, mustRange(t, "*")); ok {
		t.Fatal("Highest of no versions found one")
	}
}

// Ensure that a Range prints as written and reads from and writes to JSON as its text.
func TestRange_String(t *testing.T) {
	for _, s := range []string{"^1", " >=1.0.0   <2.0.0 ", "1.x||2", ""} {
		if got := mustRange(t, s).String(); got != s {
			t.Errorf("String() = %q, want %q", got, s)
		}
	}
	var doc struct {
		Range semver.Range `json:"range"`
	}
	if err := json.Unmarshal([]byte(`{"range":"^1.2 || ~3.4"}`), &doc); err != nil {
		t.Fatal(err)
	}
	if !doc.Range.Contains(mustVersion(t, "3.4.5")) || doc.Range.Contains(mustVersion(t, "3.5.0")) {
		t.Fatal("decoded range does not behave as ^1.2 || ~3.4")
	}
	out, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	if string(out) != `{"range":"^1.2 || ~3.4"}` {
		t.Fatalf("got %s", out)
	}
	if err := json.Unmarshal([]byte(`{"range":"^1.2.x.4"}`), &doc); err == nil || !strings.Contains(err.Error(), `invalid range "^1.2.x.4"`) {
		t.Fatalf("got error %v", err)
	}
}

func ExampleHighest() {
	r, _ := semver.ParseRange("^1.2")
	var listed []semver.Version
	for _, s := range []string{"1.1.0", "1.2.0", "1.4.2", "1.5.0-rc.1", "2.0.0"} {
		v, _ := semver.ParseVersion(s)
		listed = append(listed, v)
	}
	v, ok := semver.Highest(listed, r)
	fmt.Println(v, ok)
	// Output: 1.4.2 true
}

func ExampleRange_Subset() {
	parent, _ := semver.ParseRange("^1")
	for _, s := range []string{"^1.2", ">=1", ">=1.0.0 <2.0.0"} {
		child, _ := semver.ParseRange(s)
		fmt.Printf("%s within %s: %v\n", child, parent, child.Subset(parent))
	}
	// Output:
	// ^1.2 within ^1: true
	// >=1 within ^1: false
	// >=1.0.0 <2.0.0 within ^1: true
}
