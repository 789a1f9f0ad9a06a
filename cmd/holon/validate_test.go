package main

import (
	"bytes"
	"context"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite golden files")

// Ensure that holon validate gives the expected verdict, with field paths, for
// every manifest and mandate under testdata, and exits 1 because some are invalid.
func TestValidate_Testdata(t *testing.T) {
	root := filepath.Join("..", "..", "testdata")
	var files []string
	for _, dir := range []string{"manifests", "mandates"} {
		matches, err := filepath.Glob(filepath.Join(root, dir, "*"))
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, matches...)
	}
	if len(files) < 10 {
		t.Fatalf("found %d documents under testdata, want at least 10", len(files))
	}
	var stdout, stderr bytes.Buffer
	m := &Main{Stdout: &stdout, Stderr: &stderr, Getenv: func(string) string { return "" }}
	code := m.Run(context.Background(), append([]string{"validate"}, files...))
	if code != 1 {
		t.Errorf("exit code %d, want 1 (some documents are invalid); stderr: %s", code, stderr.String())
	}
	got := strings.ReplaceAll(stdout.String(), root+string(filepath.Separator), "")
	golden := filepath.Join(root, "validate.golden")
	if *update {
		if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run go test ./cmd/holon -run TestValidate_Testdata -update to create it)", err)
	}
	if got != string(want) {
		t.Errorf("holon validate output differs from %s:\n--- got\n%s\n--- want\n%s", golden, got, want)
	}
	// Every invalid-* document must be reported invalid, every other one ok.
	for _, f := range files {
		name := strings.TrimPrefix(f, root+string(filepath.Separator))
		ok := strings.Contains(got, name+": ok (")
		if strings.HasPrefix(filepath.Base(f), "invalid-") == ok {
			t.Errorf("%s: ok=%v, but its name says the opposite", name, ok)
		}
	}
}

// Ensure that a file that is valid on its own exits 0, and usage errors exit 2.
func TestValidate_ExitCodes(t *testing.T) {
	tests := []struct {
		args []string
		code int
	}{
		{[]string{"validate", "../../testdata/mandates/sandbox.yaml"}, 0},
		{[]string{"validate", "-registry", "../../testdata/manifests", "../../testdata/manifests/lena-invoice-fork.yaml"}, 0},
		{[]string{"validate", "../../testdata/manifests/lena-invoice-fork.yaml"}, 1}, // its upstream is not listed
		{[]string{"validate", "no-such-file.yaml"}, 1},
		{[]string{"validate"}, 2},
		{[]string{"no-such-command"}, 2},
		{[]string{"validate", "-h"}, 0},
		{[]string{"version"}, 0},
	}
	for _, tt := range tests {
		var out bytes.Buffer
		m := &Main{Stdout: &out, Stderr: &out, Getenv: func(string) string { return "" }}
		if code := m.Run(context.Background(), tt.args); code != tt.code {
			t.Errorf("holon %v: exit %d, want %d; output:\n%s", tt.args, code, tt.code, out.String())
		}
	}
}
