package semver_test

import (
	"fmt"
	"strings"
	"testing"

	"holon.dev/holon/gateway/semver"
)

// rangeSeeds are the seed corpus of the range fuzzers: every form the parser knows.
var rangeSeeds = []string{
	"", "*", "x", "1.2.3", "=1.2.3", ">1.2.3", ">=1.2.3", "<1.2.3", "<=1.2.3",
	"^1", "^1.2", "^1.2.3", "^0.2.3", "^0.0.3", "^0.0", "^0.x", "~1", "~1.2", "~1.2.3",
	"1.x", "1.2.x", "1.*", "1", "1.2", "1.2.3 - 2.3.4", "1.2 - 2", "* - 1.x",
	">=1.0.0 <2.0.0", ">= 1.2.3 < 2", "^1 || ^2", "^1.5 || ^2 || >=3.0.0 <3.1.0",
	"^1.2.3-beta.1", "1.2.3-alpha - 2.0.0-rc.1", ">=1.2.3-alpha <1.2.3-beta || 1.2.3-beta.4",
	"^18446744073709551615", ">18446744073709551615.18446744073709551615.18446744073709551615",
	"<0.0.0-0", ">2 <1", "1.2.3+build.5", "^1.2.x.4", "~>1", "v1", "1 ||",
}

// versionGrid returns releases and pre-releases around the small numbers the fuzzers mostly produce.
func versionGrid(tb testing.TB) []semver.Version {
	var vs []semver.Version
	for _, n := range []string{"0", "1", "2", "3", "18446744073709551615"} {
		for _, m := range []string{"0", "1", "2", "3"} {
			for _, p := range []string{"0", "1", "2", "3", "4"} {
				for _, pre := range []string{"", "-0", "-alpha", "-alpha.1", "-beta", "-beta.1", "-rc.1"} {
					vs = append(vs, mustVersion(tb, fmt.Sprintf("%s.%s.%s%s", n, m, p, pre)))
				}
			}
		}
	}
	return vs
}

// Ensure that ParseRange never panics, and that a parsed range prints as
// written, parses again to the same versions, and is a subset of itself.
func FuzzParseRange(f *testing.F) {
	for _, s := range rangeSeeds {
		f.Add(s)
	}
	grid := versionGrid(f)
	f.Fuzz(func(t *testing.T, s string) {
		r, err := semver.ParseRange(s)
		if err != nil {
			if !strings.HasPrefix(err.Error(), fmt.Sprintf("invalid range %q: ", s)) {
				t.Fatalf("error %q does not name the range", err)
			}
			return
		}
		if r.String() != s {
			t.Fatalf("String() = %q, want %q", r.String(), s)
		}
		if !r.Subset(r) {
			t.Fatalf("%q is not a subset of itself", s)
		}
		again, err := semver.ParseRange(r.String())
		if err != nil {
			t.Fatalf("%q parsed once but not twice: %v", s, err)
		}
		if !again.Subset(r) || !r.Subset(again) {
			t.Fatalf("%q parsed twice is not the same range", s)
		}
		for _, v := range grid {
			if r.Contains(v) != again.Contains(v) {
				t.Fatalf("%q parsed twice disagrees on %s", s, v)
			}
		}
	})
}

// Ensure that Subset never claims a range is within another when some version says otherwise.
func FuzzRange_Subset(f *testing.F) {
	for i, a := range rangeSeeds {
		f.Add(a, rangeSeeds[(i*7+3)%len(rangeSeeds)])
	}
	grid := versionGrid(f)
	f.Fuzz(func(t *testing.T, as, bs string) {
		a, err := semver.ParseRange(as)
		if err != nil {
			return
		}
		b, err := semver.ParseRange(bs)
		if err != nil {
			return
		}
		if !a.Subset(b) {
			return
		}
		for _, v := range grid {
			if a.Contains(v) && !b.Contains(v) {
				t.Fatalf("%q.Subset(%q) but only the first contains %s", as, bs, v)
			}
		}
	})
}
