package holon_test

import (
	"go/build"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const module = "holon.dev/holon"

// imports lists the project packages that a package's non-test files
// import, directly.
func imports(t *testing.T, pkg string) []string {
	t.Helper()
	dir := strings.TrimPrefix(strings.TrimPrefix(pkg, module), "/")
	if dir == "" {
		dir = "."
	}
	p, err := build.ImportDir(dir, 0)
	if err != nil {
		t.Fatalf("%s: %v", pkg, err)
	}
	var out []string
	for _, imp := range p.Imports {
		if imp == module || strings.HasPrefix(imp, module+"/") {
			out = append(out, imp)
		}
	}
	return out
}

// deps lists every project package pkg depends on, transitively.
func deps(t *testing.T, pkg string) []string {
	seen := map[string]bool{}
	var walk func(string)
	walk = func(p string) {
		for _, imp := range imports(t, p) {
			if !seen[imp] {
				seen[imp] = true
				walk(imp)
			}
		}
	}
	walk(pkg)
	var out []string
	for p := range seen {
		out = append(out, p)
	}
	slices.Sort(out)
	return out
}

// packages lists the project's packages (directories with Go files that
// are not only tests), testdata and node_modules left out.
func packages(t *testing.T) []string {
	var out []string
	err := filepath.WalkDir(".", func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			return nil
		}
		if name := d.Name(); path != "." && (name == "testdata" || name == "node_modules" || strings.HasPrefix(name, ".")) {
			return filepath.SkipDir
		}
		if _, err := build.ImportDir(path, 0); err == nil {
			out = append(out, strings.TrimSuffix(module+"/"+filepath.ToSlash(path), "/."))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// Ensure that imports flow one way (webui/manual/architecture.md, the room map): the domain
// package imports nothing of the project but journal, nothing above the
// engine reaches kv (not even through another package), the engine knows
// no store but the interface, the shared store suite is written against
// the interface alone, and the gateway's rooms import as their package
// docs say.
func TestImports_FlowOneWay(t *testing.T) {
	pkgs := packages(t)
	if !slices.Contains(pkgs, module) || !slices.Contains(pkgs, module+"/kv") {
		t.Fatalf("found packages %v: run from the module's root", pkgs)
	}
	only := func(pkg string, allowed ...string) {
		for _, imp := range imports(t, pkg) {
			if !slices.Contains(allowed, imp) {
				t.Errorf("%s imports %s; it may import only %v of the project", pkg, imp, allowed)
			}
		}
	}
	only(module, module+"/journal")
	only(module + "/journal")
	only(module+"/gateway/storetest", module, module+"/journal")
	// The PostgreSQL store (kv/pg's package doc) knows the domain and the
	// journal, nothing above them and not kv's bbolt.
	only(module+"/kv/pg", module, module+"/journal")
	// The gateway's rooms (each doc.go): the two encoders stand alone, the
	// contracts never reach the engine or the runtimes, and the engine
	// never reaches the remote runtimes, which import it.
	only(module + "/gateway/semver")
	only(module + "/gateway/canonical")
	only(module+"/gateway/contract", module, module+"/journal", module+"/gateway/semver")
	// The appliance's rooms (each package doc): leaves that import no
	// room, the HTTP plumbing and the principal under every other room,
	// and each room only the rooms listed for it. The composition root,
	// appliance itself, wires them; no room imports it.
	a := module + "/appliance/"
	rooms := map[string][]string{
		"token":       {},
		"origin":      {},
		"github":      {},
		"signin":      {module, a + "accounts", a + "auth", a + "github", a + "origin", a + "ratelimit", a + "token", a + "web", a + "wire"},
		"console":     {module, module + "/gateway", module + "/webui", a + "web", a + "auth", a + "origin", a + "ops", a + "files"},
		"ratelimit":   {},
		"web":         {module, module + "/journal", module + "/gateway", a + "token"},
		"auth":        {module, a + "token", a + "web", a + "ratelimit", a + "wire"},
		"idempotency": {module, module + "/gateway", module + "/gateway/canonical", a + "web"},
		"files":       {module, module + "/gateway", a + "web", a + "auth"},
		"catalog":     {module, module + "/journal", module + "/gateway", module + "/gateway/contract", a + "token", a + "web", a + "auth", a + "wire", a + "ratelimit", a + "files"},
		"clientmeta":  {module + "/gateway/remote"},
		"oauth":       {module, a + "web", a + "auth", a + "token", a + "ratelimit", a + "clientmeta", a + "origin", a + "accounts"},
		"ops":         {module, a + "token", a + "web"},
		"wire":        {module, module + "/journal", module + "/gateway", module + "/gateway/contract"},
		"publishing":  {module, module + "/journal", module + "/gateway", module + "/gateway/contract", module + "/gateway/remote", a + "token", a + "web", a + "auth", a + "wire", a + "accounts", a + "github"},
		"front":       {module, a + "token", a + "web", a + "auth", a + "origin", a + "ratelimit"},
		"v0":          {module, module + "/journal", module + "/gateway", a + "token", a + "web", a + "auth", a + "wire", a + "idempotency"},
		"accounts":    {module, module + "/journal", module + "/gateway", module + "/gateway/contract", a + "token", a + "web", a + "auth", a + "ratelimit", a + "wire"},
		"reports":     {module, module + "/gateway", a + "token", a + "web", a + "auth", a + "wire"},
		"alerts":      {module, module + "/gateway", module + "/gateway/remote", a + "token", a + "web", a + "auth", a + "wire"},
		"mcpserver":   {module, module + "/journal", module + "/gateway", module + "/gateway/contract", a + "web", a + "auth", a + "token", a + "wire"},
		// The agents compiled in, and two helpers of the tests.
		"agents":     {module, module + "/journal", module + "/gateway", module + "/gateway/contract"},
		"githubtest": {},
		"npmtest":    {},
	}
	for room, allowed := range rooms {
		only(a+room, allowed...)
	}
	// A room with no rule is a room nobody holds to one.
	for _, p := range pkgs {
		if room, ok := strings.CutPrefix(p, a); ok && rooms[room] == nil {
			t.Errorf("%s has no import rule in TestImports_FlowOneWay: add one, as its package doc says", p)
		}
	}
	// The console is a client of the API: of the appliance, it sees the
	// wire types and the one origin rule (a leaf) alone.
	for _, imp := range imports(t, module+"/webui") {
		if strings.HasPrefix(imp, module+"/appliance") && imp != a+"wire" && imp != a+"origin" {
			t.Errorf("webui imports %s: of the appliance, the console may import only the API's wire types (appliance/wire) and the origin rule (appliance/origin)", imp)
		}
	}
	for _, p := range pkgs {
		if strings.HasPrefix(p, a) && slices.Contains(imports(t, p), module+"/appliance") {
			t.Errorf("%s imports the composition root appliance: rooms are wired by it, never the reverse", p)
		}
	}
	if d := deps(t, module+"/gateway"); slices.Contains(d, module+"/gateway/remote") {
		t.Errorf("the engine depends on gateway/remote (its project dependencies: %v): the runtimes import the engine, never the reverse", d)
	}
	for _, p := range pkgs {
		under := func(room string) bool { return p == module+"/"+room || strings.HasPrefix(p, module+"/"+room+"/") }
		if under("appliance") || under("webui") || under("gateway") {
			if d := deps(t, p); slices.Contains(d, module+"/kv") || slices.Contains(d, module+"/kv/pg") {
				t.Errorf("%s depends on a store package (its project dependencies: %v): above the store, only holon.Store may be seen", p, d)
			}
		}
		if !under("bench") && !under("cmd") {
			if d := deps(t, p); slices.Contains(d, module+"/bench/drill/lossyfs") {
				t.Errorf("%s depends on bench/drill/lossyfs (its project dependencies: %v): the lossy filesystem is for tests and drills only", p, d)
			}
		}
		if under("kv") || under("journal") {
			for _, imp := range imports(t, p) {
				if !strings.HasPrefix(imp, module+"/kv") && imp != module && imp != module+"/journal" {
					t.Errorf("%s imports %s: the store imports nothing above it", p, imp)
				}
			}
		}
	}
}
