package main

import (
	"bytes"
	"context"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// The configuration reference: webui/manual/configuration.md.
const (
	moduleRoot = "../.."
	configPage = moduleRoot + "/webui/manual/configuration.md"
)

// Ensure that the configuration reference lists every setting the code
// reads and nothing else: every flag of every subcommand (found by asking
// each FlagSet the sources create for its flags) and every environment
// variable (found in the sources: each getenv-like call with a constant
// name, and every HOLON_/ANTHROPIC_ name written as a string, as the
// settings read in a loop are), plus the ones holon.service passes.
func TestConfigReference(t *testing.T) {
	listedFlags, listedEnv := referenceTable(t)
	codeFlags := flagsOfCode(t)
	codeEnv := envOfCode(t, moduleRoot)
	for _, s := range codeFlags {
		if !listedFlags[s] {
			t.Errorf("%s is a flag the code reads, missing from %s: add its row (default, production, what it does)", s, configPage)
		}
	}
	for s := range listedFlags {
		if !slices.Contains(codeFlags, s) {
			t.Errorf("%s is listed in %s, but no subcommand has that flag", s, configPage)
		}
	}
	for s := range codeEnv {
		if !listedEnv[s] {
			t.Errorf("%s is an environment variable the code reads (%s), missing from %s: add its row", s, codeEnv[s], configPage)
		}
	}
	for s := range listedEnv {
		if _, ok := codeEnv[s]; !ok {
			t.Errorf("%s is listed in %s, but nothing reads it", s, configPage)
		}
	}
	if len(codeFlags) < 50 || len(codeEnv) < 25 {
		t.Errorf("found only %d flags and %d environment variables: the scan is broken", len(codeFlags), len(codeEnv))
	}
}

// Ensure that the Go version the manual and the README state is the one
// go.mod asks for, and that the README's settings are in the reference.
func TestConfigReference_GoVersionAndReadme(t *testing.T) {
	mod, err := os.ReadFile(moduleRoot + "/go.mod")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^go (\S+)$`).FindSubmatch(mod)
	if m == nil {
		t.Fatal("go.mod has no go line")
	}
	want := "Go " + string(m[1]) + " or newer"
	readme, _ := os.ReadFile(moduleRoot + "/README.md")
	page, _ := os.ReadFile(configPage)
	for name, b := range map[string][]byte{"README.md": readme, configPage: page} {
		if !bytes.Contains(bytes.Join(bytes.Fields(b), []byte(" ")), []byte(want)) {
			t.Errorf("%s does not say %q (go.mod's go line)", name, want)
		}
	}
	flags, env := referenceTable(t)
	readmeFlags, readmeEnv := tableSettings(t, string(readme))
	for s := range readmeFlags {
		if !flags[s] {
			t.Errorf("README.md lists %s, which the reference does not", s)
		}
	}
	for s := range readmeEnv {
		if !env[s] {
			t.Errorf("README.md lists %s, which the reference does not", s)
		}
	}
}

// referenceTable reads the settings of the reference's tables.
func referenceTable(t *testing.T) (flags, env map[string]bool) {
	t.Helper()
	b, err := os.ReadFile(configPage)
	if err != nil {
		t.Fatal(err)
	}
	return tableSettings(t, string(b))
}

var (
	codeSpan = regexp.MustCompile("`([^`]+)`")
	envName  = regexp.MustCompile(`^[A-Z][A-Z0-9]*(_[A-Z0-9]+)*$`) // HOLON_ENV, GOGC
)

// tableSettings reads the first cell of every table row of a markdown
// text: "`holon serve --addr`" is a flag, "`HOLON_ENV`" a variable.
func tableSettings(t *testing.T, md string) (flags, env map[string]bool) {
	t.Helper()
	flags, env = map[string]bool{}, map[string]bool{}
	for _, line := range strings.Split(md, "\n") {
		if !strings.HasPrefix(line, "| `") {
			continue
		}
		cell := strings.Split(line, "|")[1]
		for _, m := range codeSpan.FindAllStringSubmatch(cell, -1) {
			s := m[1]
			switch {
			case strings.HasPrefix(s, "holon "):
				f := strings.Fields(s)
				flags[strings.Join(f[:len(f)-1], " ")+" "+strings.TrimLeft(f[len(f)-1], "-")] = true
			case envName.MatchString(s):
				env[s] = true
			default:
				t.Errorf("table row %q: %q is neither a flag nor a variable", line, s)
			}
		}
	}
	return flags, env
}

// flagsOfCode is every flag of every FlagSet the command's sources create
// ("holon serve addr"), each found by running the subcommand with -h.
func flagsOfCode(t *testing.T) []string {
	t.Helper()
	sets := flagSetNames(t)
	var out []string
	flagLine := regexp.MustCompile(`(?m)^  -(\S+)`)
	for _, set := range sets {
		var buf bytes.Buffer
		m := &Main{Stdin: strings.NewReader(""), Stdout: &buf, Stderr: &buf, Getenv: func(string) string { return "" }}
		args := append(strings.Fields(set), "-h")
		if code := m.Run(context.Background(), args); code != 0 && code != 2 {
			t.Errorf("holon %s: exit %d", strings.Join(args, " "), code)
		}
		for _, f := range flagLine.FindAllStringSubmatch(buf.String(), -1) {
			out = append(out, "holon "+set+" "+f[1])
		}
	}
	sort.Strings(out)
	return slices.Compact(out)
}

// flagSetNames are the names of the FlagSets cmd/holon creates: each is
// the subcommand (with its own subcommand: "agents serve") it parses.
func flagSetNames(t *testing.T) []string {
	t.Helper()
	var names []string
	for _, f := range parseDir(t, ".") {
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok || !isSelector(call.Fun, "flag", "NewFlagSet") || len(call.Args) == 0 {
				return true
			}
			lit, ok := call.Args[0].(*ast.BasicLit)
			if !ok {
				t.Errorf("flag.NewFlagSet with a name that is not a constant string: the reference test cannot run it")
				return true
			}
			s, _ := strconv.Unquote(lit.Value)
			names = append(names, s)
			return true
		})
	}
	if !slices.Contains(names, "serve") {
		t.Fatalf("no FlagSet \"serve\" among %v", names)
	}
	return names
}

// envOfCode is every environment variable the module's sources read,
// each with where it was found; test files are left out, test helpers
// in other files are not.
func envOfCode(t *testing.T, root string) map[string]string {
	t.Helper()
	out := map[string]string{}
	setting := regexp.MustCompile(`^(HOLON|ANTHROPIC)_[A-Z0-9_]+$`)
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); p != root && (strings.HasPrefix(n, ".") || n == "testdata" || n == "node_modules") {
				return filepath.SkipDir
			}
			return nil
		}
		switch {
		case d.Name() == "holon.service":
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			for _, m := range regexp.MustCompile(`\$\{?([A-Z][A-Z0-9_]+)|Environment=([A-Z][A-Z0-9_]+)=`).FindAllStringSubmatch(string(b), -1) {
				out[m[1]+m[2]] = p
			}
			return nil
		case !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go"):
			return nil
		}
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, p, nil, 0)
		if err != nil {
			return err
		}
		consts := map[string]string{}
		ast.Inspect(f, func(n ast.Node) bool {
			if vs, ok := n.(*ast.ValueSpec); ok {
				for i, name := range vs.Names {
					if i < len(vs.Values) {
						if lit, ok := vs.Values[i].(*ast.BasicLit); ok && lit.Kind == token.STRING {
							consts[name.Name], _ = strconv.Unquote(lit.Value)
						}
					}
				}
			}
			return true
		})
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.BasicLit:
				if s, err := strconv.Unquote(n.Value); n.Kind == token.STRING && err == nil && setting.MatchString(s) {
					out[s] = fset.Position(n.Pos()).String()
				}
			case *ast.CallExpr:
				if !isGetenv(n.Fun) || len(n.Args) == 0 {
					return true
				}
				switch a := n.Args[0].(type) {
				case *ast.BasicLit:
					s, _ := strconv.Unquote(a.Value)
					out[s] = fset.Position(n.Pos()).String()
				case *ast.Ident:
					if s, ok := consts[a.Name]; ok {
						out[s] = fset.Position(n.Pos()).String()
					}
				}
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// isGetenv reports whether fn reads the environment: os.Getenv,
// os.LookupEnv, or a getenv function handed down (getenv, c.getenv).
func isGetenv(fn ast.Expr) bool {
	switch f := fn.(type) {
	case *ast.Ident:
		return f.Name == "getenv" || f.Name == "Getenv"
	case *ast.SelectorExpr:
		return f.Sel.Name == "getenv" || f.Sel.Name == "Getenv" || f.Sel.Name == "LookupEnv"
	}
	return false
}

func isSelector(e ast.Expr, pkg, name string) bool {
	s, ok := e.(*ast.SelectorExpr)
	if !ok || s.Sel.Name != name {
		return false
	}
	id, ok := s.X.(*ast.Ident)
	return ok && id.Name == pkg
}

// parseDir parses the non-test Go files of one directory.
func parseDir(t *testing.T, dir string) []*ast.File {
	t.Helper()
	paths, _ := filepath.Glob(filepath.Join(dir, "*.go"))
	var files []*ast.File
	for _, p := range paths {
		if strings.HasSuffix(p, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), p, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	return files
}
