package catalog

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strings"

	"holon.dev/holon/appliance/files"
)

// Evaluation fixtures (spec/evals.md §1): the files a suite's cases read,
// in <capability>/files/ beside its suite.yaml, named in a case's input as
// holon://files/eval/<path>. At start-up each is stored as a platform file
// (content-addressed, so a restart finds it again instead of adding one)
// and the cases' inputs are given its real handle: an agent reads it only
// while it is evaluated, and a caller who passes the handle gets
// file_not_found.

// fixturePrefix starts a case's reference to one of its suite's fixtures.
const fixturePrefix = "holon://files/eval/"

// evalFixture is one fixture file of a suite.
type evalFixture struct {
	ContentType string
	Data        []byte
}

// fixtureTypes are the content types given to fixtures by extension, fixed
// here rather than read from the system's table, so that a fixture's
// handle is the same on every host.
var fixtureTypes = map[string]string{
	".csv":  "text/csv",
	".txt":  "text/plain; charset=utf-8",
	".md":   "text/markdown; charset=utf-8",
	".json": "application/json",
	".pdf":  "application/pdf",
	".html": "text/html; charset=utf-8",
	".png":  "image/png",
	".jpg":  "image/jpeg",
}

func fixtureType(name string) string {
	if t, ok := fixtureTypes[strings.ToLower(path.Ext(name))]; ok {
		return t
	}
	return "application/octet-stream"
}

// readFixtures reads every file under dir/files of fsys, by its path
// below files/ (none when there is no such directory).
func readFixtures(fsys fs.FS, dir string) (map[string]evalFixture, error) {
	root := path.Join(dir, "files")
	out := map[string]evalFixture{}
	err := fs.WalkDir(fsys, root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(fsys, p)
		if err != nil {
			return err
		}
		if len(b) > files.MaxFileSize {
			return fmt.Errorf("%s: %d bytes, more than a file may hold (20 MB)", p, len(b))
		}
		out[strings.TrimPrefix(p, root+"/")] = evalFixture{ContentType: fixtureType(p), Data: b}
		return nil
	})
	if errors.Is(err, fs.ErrNotExist) {
		return out, nil
	}
	return out, err
}

// checkFixtures wants every holon://files/eval/ reference of the cases to
// name one of the suite's fixtures, and makes the suite's version cover
// their bytes too (a fixture changed is a suite changed).
func (s *evalSuite) checkFixtures(fixtures map[string]evalFixture, yaml []byte) error {
	for i, c := range s.Cases {
		var missing string
		walkStrings(c.Input, func(v string) string {
			if p, ok := strings.CutPrefix(v, fixturePrefix); ok && missing == "" {
				if _, ok := fixtures[p]; !ok {
					missing = p
				}
			}
			return v
		})
		if missing != "" {
			return fmt.Errorf("cases[%d] (%s): %s%s: no file %s in %s/files/", i, c.ID, fixturePrefix, missing, missing, s.Capability)
		}
	}
	s.Fixtures = fixtures
	if len(fixtures) == 0 {
		return nil
	}
	h := sha256.New()
	h.Write(yaml)
	names := make([]string, 0, len(fixtures))
	for p := range fixtures {
		names = append(names, p)
	}
	sort.Strings(names)
	for _, p := range names {
		fmt.Fprintf(h, "\x00%s\x00%s\x00%d\x00", p, fixtures[p].ContentType, len(fixtures[p].Data))
		h.Write(fixtures[p].Data)
	}
	s.Version = "sha256:" + hex.EncodeToString(h.Sum(nil)[:6])
	return nil
}

// storeFixtures stores each suite's fixtures with put (as platform files)
// and puts the handles put returns in place of the cases' references.
func storeFixtures(ctx context.Context, suites map[string]*evalSuite, put func(ctx context.Context, contentType string, data []byte) (string, error)) error {
	for _, s := range suites {
		handles := make(map[string]string, len(s.Fixtures))
		for p, f := range s.Fixtures {
			h, err := put(ctx, f.ContentType, f.Data)
			if err != nil {
				return fmt.Errorf("eval fixture %s/files/%s: %w", s.Capability, p, err)
			}
			handles[p] = h
		}
		for i := range s.Cases {
			s.Cases[i].Input = walkStrings(s.Cases[i].Input, func(v string) string {
				if p, ok := strings.CutPrefix(v, fixturePrefix); ok {
					return handles[p]
				}
				return v
			})
		}
		s.Fixtures = nil // stored: the bytes are not kept in memory
	}
	return nil
}

// walkStrings returns v (a decoded JSON value) with every string replaced
// by f's answer for it.
func walkStrings(v any, f func(string) string) any {
	switch x := v.(type) {
	case string:
		return f(x)
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = walkStrings(e, f)
		}
		return out
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = walkStrings(e, f)
		}
		return out
	}
	return v
}
