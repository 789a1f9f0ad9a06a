package catalog

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"sort"

	"gopkg.in/yaml.v3"
	"holon.dev/holon/gateway/contract"
)

// publicSuites are the sample suites shipped in the repository
// (spec/evals.md §1), one evals/<capability>/suite.yaml each.
//
//go:embed evals
var publicSuites embed.FS

// evalSuite is one capability's cases.
type evalSuite struct {
	Capability string     `yaml:"capability"`
	Cases      []evalCase `yaml:"cases"`
	// Version identifies the suite's content ("sha256:<12 hex>"): a
	// result says which cases it was measured on.
	Version string `yaml:"-"`
	// Source is "public" (shipped) or "private" (HOLON_PRIVATE_EVALS).
	Source string `yaml:"-"`
	// Fixtures are the files of <capability>/files/, by path, until
	// storeFixtures stores them (evalfixtures.go).
	Fixtures map[string]evalFixture `yaml:"-"`
}

// evalCase is one case: an input, and what its answer must show.
type evalCase struct {
	ID     string     `yaml:"id"`
	Public bool       `yaml:"public"`
	Input  any        `yaml:"input"`
	Expect evalExpect `yaml:"expect"`
}

// evalExpect are a case's checks; every one given must hold.
type evalExpect struct {
	// OutputContains is a JSON subset of the output.
	OutputContains any `yaml:"output_contains"`
	// Error is the declared error expected instead of an output.
	Error string `yaml:"error"`
}

// loadSuites reads the shipped suites and, when privateDir is set, the
// operator's, whose suites replace the shipped ones capability by
// capability.
func loadSuites(privateDir string) (map[string]*evalSuite, error) {
	sub, err := fs.Sub(publicSuites, "evals")
	if err != nil {
		return nil, err
	}
	suites, err := readSuites(sub, "public")
	if err != nil {
		return nil, fmt.Errorf("shipped eval suites: %w", err)
	}
	if privateDir == "" {
		return suites, nil
	}
	if st, err := os.Stat(privateDir); err != nil || !st.IsDir() {
		return nil, fmt.Errorf("HOLON_PRIVATE_EVALS: %s is not a directory", privateDir)
	}
	private, err := readSuites(os.DirFS(privateDir), "private")
	if err != nil {
		return nil, fmt.Errorf("HOLON_PRIVATE_EVALS %s: %w", privateDir, err)
	}
	for c, s := range private {
		suites[c] = s
	}
	return suites, nil
}

// readSuites reads every <capability>/suite.yaml of fsys.
func readSuites(fsys fs.FS, source string) (map[string]*evalSuite, error) {
	out := map[string]*evalSuite{}
	dirs, err := fs.ReadDir(fsys, ".")
	if err != nil {
		return nil, err
	}
	for _, d := range dirs {
		if !d.IsDir() {
			continue
		}
		name := path.Join(d.Name(), "suite.yaml")
		b, err := fs.ReadFile(fsys, name)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, err
		}
		s, err := parseSuite(b)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		if s.Capability != d.Name() {
			return nil, fmt.Errorf("%s: capability %q, but the directory is %q", name, s.Capability, d.Name())
		}
		fixtures, err := readFixtures(fsys, d.Name())
		if err != nil {
			return nil, fmt.Errorf("%s fixtures: %w", d.Name(), err)
		}
		if err := s.checkFixtures(fixtures, b); err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		s.Source = source
		out[s.Capability] = s
	}
	return out, nil
}

// parseSuite reads and checks one suite.yaml.
func parseSuite(b []byte) (*evalSuite, error) {
	var s evalSuite
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(&s); err != nil {
		return nil, err
	}
	if !contract.ValidCapability(s.Capability) {
		return nil, fmt.Errorf("capability %q is not a capability", s.Capability)
	}
	if len(s.Cases) == 0 {
		return nil, errors.New("cases: a suite needs at least one case")
	}
	seen := map[string]bool{}
	for i := range s.Cases {
		c := &s.Cases[i]
		if c.ID == "" || seen[c.ID] {
			return nil, fmt.Errorf("cases[%d]: id %q is empty or repeated", i, c.ID)
		}
		seen[c.ID] = true
		if c.Input == nil {
			return nil, fmt.Errorf("cases[%d] (%s): input is required", i, c.ID)
		}
		if (c.Expect.OutputContains == nil) == (c.Expect.Error == "") {
			return nil, fmt.Errorf("cases[%d] (%s): expect needs exactly one of output_contains and error", i, c.ID)
		}
		var err error
		if c.Input, err = jsonValue(c.Input); err != nil {
			return nil, fmt.Errorf("cases[%d] (%s): input: %w", i, c.ID, err)
		}
		if c.Expect.OutputContains != nil {
			if c.Expect.OutputContains, err = jsonValue(c.Expect.OutputContains); err != nil {
				return nil, fmt.Errorf("cases[%d] (%s): output_contains: %w", i, c.ID, err)
			}
		}
	}
	sum := sha256.Sum256(b)
	s.Version = "sha256:" + hex.EncodeToString(sum[:6])
	return &s, nil
}

// jsonValue turns a YAML value into what encoding/json decodes the same
// value to, so that a case compares like for like with an output.
func jsonValue(v any) (any, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	var out any
	return out, json.Unmarshal(b, &out)
}

// subsetDiff says where got fails to contain want ("" when it does):
// objects need every key of want, with a value that contains want's;
// arrays need the same length, element by element; other values must be
// equal.
func subsetDiff(want, got any, at string) string {
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			return fmt.Sprintf("%s: want an object, got %s", at, short(got))
		}
		keys := make([]string, 0, len(w))
		for k := range w {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			gv, ok := g[k]
			if !ok {
				return fmt.Sprintf("%s.%s: missing", at, k)
			}
			if d := subsetDiff(w[k], gv, at+"."+k); d != "" {
				return d
			}
		}
		return ""
	case []any:
		g, ok := got.([]any)
		if !ok {
			return fmt.Sprintf("%s: want an array, got %s", at, short(got))
		}
		if len(g) != len(w) {
			return fmt.Sprintf("%s: want %d items, got %d", at, len(w), len(g))
		}
		for i := range w {
			if d := subsetDiff(w[i], g[i], fmt.Sprintf("%s[%d]", at, i)); d != "" {
				return d
			}
		}
		return ""
	}
	if want != got {
		return fmt.Sprintf("%s: want %s, got %s", at, short(want), short(got))
	}
	return ""
}

// short writes a value for a diff, cut to a readable length.
func short(v any) string {
	b, _ := json.Marshal(v)
	if len(b) > 80 {
		return string(b[:77]) + "..."
	}
	return string(b)
}
