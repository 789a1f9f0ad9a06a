package semver_test

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"holon.dev/holon/gateway/semver"
)

// mustVersion parses s or fails the test.
func mustVersion(tb testing.TB, s string) semver.Version {
	tb.Helper()
	v, err := semver.ParseVersion(s)
	if err != nil {
		tb.Fatal(err)
	}
	return v
}

// Ensure that valid versions parse into their parts and print back unchanged.
func TestParseVersion(t *testing.T) {
	for _, tt := range []struct {
		in                  string
		major, minor, patch uint64
		pre                 []string
		build               string
	}{
		{in: "0.0.0"},
		{in: "1.2.3", major: 1, minor: 2, patch: 3},
		{in: "10.20.30", major: 10, minor: 20, patch: 30},
		{in: "1.0.0-alpha", major: 1, pre: []string{"alpha"}},
		{in: "1.0.0-alpha.1", major: 1, pre: []string{"alpha", "1"}},
		{in: "1.0.0-0.3.7", major: 1, pre: []string{"0", "3", "7"}},
		{in: "1.0.0-x.7.z.92", major: 1, pre: []string{"x", "7", "z", "92"}},
		{in: "1.0.0-x-y--z.0a", major: 1, pre: []string{"x-y--z", "0a"}},
		{in: "1.0.0+20130313144700", major: 1, build: "20130313144700"},
		{in: "1.0.0-beta+exp.sha.5114f85", major: 1, pre: []string{"beta"}, build: "exp.sha.5114f85"},
		{in: "1.0.0+21AF26D3----117B344092BD", major: 1, build: "21AF26D3----117B344092BD"},
		{in: "1.0.0+001", major: 1, build: "001"},
		{in: "18446744073709551615.0.0", major: 18446744073709551615},
	} {
		t.Run(tt.in, func(t *testing.T) {
			v, err := semver.ParseVersion(tt.in)
			if err != nil {
				t.Fatal(err)
			}
			if v.Major != tt.major || v.Minor != tt.minor || v.Patch != tt.patch || !slices.Equal(v.Pre, tt.pre) || v.Build != tt.build {
				t.Fatalf("got %+v", v)
			}
			if got := v.String(); got != tt.in {
				t.Fatalf("String() = %q", got)
			}
			if got := v.IsPrerelease(); got != (len(tt.pre) > 0) {
				t.Fatalf("IsPrerelease() = %v", got)
			}
		})
	}
}

// Ensure that malformed versions are refused with an error that says what is wrong.
func TestParseVersion_Invalid(t *testing.T) {
	for _, tt := range []struct{ in, err string }{
		{"", `invalid version "": empty`},
		{"v1.2.3", `invalid version "v1.2.3": a leading "v" is not allowed`},
		{"1.2", `want MAJOR.MINOR.PATCH, got 2 part(s) in "1.2"`},
		{"1.2.3.4", `want MAJOR.MINOR.PATCH, got 4 part(s)`},
		{"01.2.3", `major "01" has a leading zero`},
		{"1.02.3", `minor "02" has a leading zero`},
		{"1.2.03", `patch "03" has a leading zero`},
		{"1..3", `empty minor`},
		{"1.x.3", `minor "x" is not a number`},
		{"1.2.3-", `empty pre-release`},
		{"1.2.3-beta..1", `empty pre-release identifier in "beta..1"`},
		{"1.2.3-01", `pre-release identifier "01" has a leading zero`},
		{"1.2.3-be_ta", `pre-release identifier "be_ta" has a character outside [0-9A-Za-z-]`},
		{"1.2.3+", `empty build`},
		{"1.2.3+a..b", `empty build identifier`},
		{"1.2.3+a b", `build identifier "a b" has a character`},
		{"18446744073709551616.0.0", `major "18446744073709551616" is too large`},
		{" 1.2.3", `major " 1" is not a number`},
	} {
		t.Run(tt.in, func(t *testing.T) {
			_, err := semver.ParseVersion(tt.in)
			if err == nil {
				t.Fatal("expected an error")
			}
			if !strings.Contains(err.Error(), tt.err) {
				t.Fatalf("error %q does not contain %q", err, tt.err)
			}
		})
	}
}

// Ensure that versions order by SemVer precedence, pre-releases included and build ignored.
func TestVersion_Compare(t *testing.T) {
	// Each version has lower precedence than the next (SemVer 2.0.0 §11 and more).
	ordered := []string{
		"0.0.0-0",
		"0.0.0",
		"1.0.0-0",
		"1.0.0-alpha",
		"1.0.0-alpha.1",
		"1.0.0-alpha.beta",
		"1.0.0-beta",
		"1.0.0-beta.2",
		"1.0.0-beta.11",
		"1.0.0-beta.99999999999999999999",
		"1.0.0-beta.100000000000000000000",
		"1.0.0-beta.a",
		"1.0.0-rc.1",
		"1.0.0",
		"1.0.1",
		"1.1.0",
		"1.10.0",
		"2.0.0",
		"10.0.0",
		"18446744073709551615.0.0",
	}
	for i, a := range ordered {
		for j, b := range ordered {
			want := 0
			switch {
			case i < j:
				want = -1
			case i > j:
				want = 1
			}
			if got := mustVersion(t, a).Compare(mustVersion(t, b)); got != want {
				t.Errorf("%s.Compare(%s) = %d, want %d", a, b, got, want)
			}
		}
	}
	for _, tt := range [][2]string{
		{"1.0.0+a", "1.0.0+b"},
		{"1.0.0-rc.1+a", "1.0.0-rc.1"},
	} {
		if got := mustVersion(t, tt[0]).Compare(mustVersion(t, tt[1])); got != 0 {
			t.Errorf("%s.Compare(%s) = %d, want 0", tt[0], tt[1], got)
		}
	}
}

// Ensure that a Version reads from and writes to JSON as its string.
func TestVersion_UnmarshalText(t *testing.T) {
	var doc struct {
		Version semver.Version `json:"version"`
	}
	if err := json.Unmarshal([]byte(`{"version":"0.4.0-rc.1+b7"}`), &doc); err != nil {
		t.Fatal(err)
	}
	if got := doc.Version.String(); got != "0.4.0-rc.1+b7" {
		t.Fatalf("got %q", got)
	}
	out, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	if string(out) != `{"version":"0.4.0-rc.1+b7"}` {
		t.Fatalf("got %s", out)
	}
	if err := json.Unmarshal([]byte(`{"version":"0.4"}`), &doc); err == nil || !strings.Contains(err.Error(), `invalid version "0.4"`) {
		t.Fatalf("got error %v", err)
	}
}
