package appliance_test

import (
	"bytes"
	"flag"
	"fmt"
	"io"
	"mime"
	"net/http"
	"os"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"holon.dev/holon/appliance"
	"holon.dev/holon/appliance/web"
	"holon.dev/holon/webui"
)

// updateCodes rewrites the description's ErrorCode enum and the API
// page's table of codes from web.Statuses.
var updateCodes = flag.Bool("update-codes", false, "rewrite the error codes of openapi.yaml and api.md from web.Statuses")

// specURL names the OpenAPI description for the schema compiler.
const specURL = "https://holon.dev/openapi.json"

// apiSpec is the gateway's OpenAPI description (webui.OpenAPI), with the
// schemas of its answers compiled as they are needed.
type apiSpec struct {
	doc   map[string]any
	c     *jsonschema.Compiler
	mu    sync.Mutex
	cache map[string]*jsonschema.Schema
}

func loadSpec(t testing.TB) *apiSpec {
	t.Helper()
	b, err := webui.OpenAPI()
	if err != nil {
		t.Fatal(err)
	}
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	doc, ok := v.(map[string]any)
	if !ok || doc["openapi"] != "3.1.0" {
		t.Fatalf("not an OpenAPI 3.1.0 document: %.200s", b)
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	if err := c.AddResource(specURL, doc); err != nil {
		t.Fatal(err)
	}
	return &apiSpec{doc: doc, c: c, cache: map[string]*jsonschema.Schema{}}
}

// methods are the operations a path item may hold.
var methods = []string{"get", "put", "post", "delete", "options", "head", "patch"}

// routes are the description's operations, "GET /v0/agents/{ns}/{name}".
func (s *apiSpec) routes() []string {
	var out []string
	for p, item := range s.doc["paths"].(map[string]any) {
		for _, m := range methods {
			if _, ok := item.(map[string]any)[m]; ok {
				out = append(out, strings.ToUpper(m)+" "+p)
			}
		}
	}
	sort.Strings(out)
	return out
}

// template is the path of the description a request's path matches: the
// one with the fewest parameters, so /v0/agents/draft wins over
// /v0/agents/{ns}/{name}.
func (s *apiSpec) template(path string) string {
	best, bestParams := "", -1
	got := strings.Split(path, "/")
	for p := range s.doc["paths"].(map[string]any) {
		segs := strings.Split(p, "/")
		if len(segs) != len(got) {
			continue
		}
		params, ok := 0, true
		for i, seg := range segs {
			if strings.HasPrefix(seg, "{") {
				params++
			} else if seg != got[i] {
				ok = false
				break
			}
		}
		if ok && (bestParams < 0 || params < bestParams) {
			best, bestParams = p, params
		}
	}
	return best
}

// pointer escapes a JSON pointer's token.
func pointer(tok string) string {
	return strings.ReplaceAll(strings.ReplaceAll(tok, "~", "~0"), "/", "~1")
}

// schema compiles the schema at a JSON pointer of the description.
func (s *apiSpec) schema(ptr string) (*jsonschema.Schema, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if sch, ok := s.cache[ptr]; ok {
		return sch, nil
	}
	sch, err := s.c.Compile(specURL + "#" + ptr)
	if err != nil {
		return nil, err
	}
	s.cache[ptr] = sch
	return sch, nil
}

// check says what is wrong with an answer the gateway gave, by the
// description: its path, method, status and media type must be
// described, and a JSON body must be valid against its schema.
func (s *apiSpec) check(method, target string, status int, header http.Header, body []byte) error {
	path, _, _ := strings.Cut(target, "?")
	tmpl := s.template(path)
	var op map[string]any
	if tmpl != "" {
		op, _ = s.doc["paths"].(map[string]any)[tmpl].(map[string]any)[strings.ToLower(method)].(map[string]any)
	}
	if op == nil {
		// No such route: the router's own refusal, 404 or 405.
		if status != http.StatusNotFound && status != http.StatusMethodNotAllowed {
			return fmt.Errorf("%s %s: not in the description, yet answered %d", method, path, status)
		}
		return s.validate("/components/schemas/Error", method, path, status, body)
	}
	responses := op["responses"].(map[string]any)
	code := strconv.Itoa(status)
	resp, ok := responses[code].(map[string]any)
	if !ok {
		if resp, ok = responses["default"].(map[string]any); !ok {
			return fmt.Errorf("%s %s: status %d is not described", method, tmpl, status)
		}
		code = "default"
	}
	ptr := "/paths/" + pointer(tmpl) + "/" + strings.ToLower(method) + "/responses/" + code
	if ref, ok := resp["$ref"].(string); ok {
		ptr = strings.TrimPrefix(ref, "#")
		resp = s.doc["components"].(map[string]any)["responses"].(map[string]any)[strings.TrimPrefix(ref, "#/components/responses/")].(map[string]any)
	}
	content, ok := resp["content"].(map[string]any)
	if !ok {
		return nil // no body described (a redirect, a preflight)
	}
	media, _, _ := mime.ParseMediaType(header.Get("Content-Type"))
	if _, ok := content[media]; !ok {
		if _, any := content["*/*"]; any {
			return nil
		}
		return fmt.Errorf("%s %s: %d answered %q, not described (%v)", method, tmpl, status, media, slices.Sorted(mapKeys(content)))
	}
	if media != "application/json" {
		return nil
	}
	return s.validate(ptr+"/content/"+pointer(media)+"/schema", method, path, status, body)
}

// validate checks a JSON body against the schema at ptr.
func (s *apiSpec) validate(ptr, method, path string, status int, body []byte) error {
	sch, err := s.schema(ptr)
	if err != nil {
		return fmt.Errorf("%s %s: compile the schema of %d: %v", method, path, status, err)
	}
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("%s %s: %d: not JSON: %v", method, path, status, err)
	}
	if err := sch.Validate(v); err != nil {
		return fmt.Errorf("%s %s: %d: the answer does not match the description: %v\n%.2000s", method, path, status, err, body)
	}
	return nil
}

func mapKeys(m map[string]any) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// checkTranscript checks every answer a hosted test app gave.
func (s *apiSpec) checkTranscript(t testing.TB, ta *hostedApp) int {
	t.Helper()
	ta.mu.Lock()
	defer ta.mu.Unlock()
	n := 0
	for _, e := range ta.transcript {
		if e.path == "/mcp" || strings.HasPrefix(e.path, webui.Prefix) {
			continue // MCP's JSON-RPC and the console's pages are not this API
		}
		n++
		if err := s.check(e.method, e.path, e.status, e.header, e.body); err != nil {
			t.Error(err)
		}
	}
	return n
}

// routerRoutes are the routes an appliance's router serves, as
// "GET /v0/agents/{ns}/{name}": App.Routes when the appliance has it,
// else read from its router's trees.
func routerRoutes(t *testing.T, app *appliance.App) []string {
	t.Helper()
	var out []string
	add := func(method, path string) {
		path = regexp.MustCompile(`[:*](\w+)`).ReplaceAllString(path, "{$1}")
		out = append(out, method+" "+path)
	}
	if m := reflect.ValueOf(app).MethodByName("Routes"); m.IsValid() {
		rs := m.Call(nil)[0]
		for i := 0; i < rs.Len(); i++ {
			r := reflect.Indirect(rs.Index(i))
			add(r.FieldByName("Method").String(), r.FieldByName("Path").String())
		}
		return out
	}
	h := reflect.ValueOf(app).Elem().FieldByName("handler")
	for h.Kind() == reflect.Interface || h.Kind() == reflect.Pointer {
		h = h.Elem()
	}
	router := h.FieldByName("router")
	if !router.IsValid() {
		t.Fatal("the appliance has neither App.Routes nor a router to read its routes from")
	}
	trees := router.Elem().FieldByName("trees")
	var walk func(method, prefix string, n reflect.Value)
	walk = func(method, prefix string, n reflect.Value) {
		n = n.Elem()
		p := prefix + n.FieldByName("path").String()
		if !n.FieldByName("handle").IsNil() {
			add(method, p)
		}
		ch := n.FieldByName("children")
		for i := 0; i < ch.Len(); i++ {
			walk(method, p, ch.Index(i))
		}
	}
	for _, k := range trees.MapKeys() {
		walk(k.String(), "", trees.MapIndex(k))
	}
	return out
}

// Ensure that the OpenAPI description holds every route the gateway
// serves (a dev gateway's and a hosted one's), and that every route it
// holds is served. The console's pages and / are not the API; /metrics is
// served in front of the router.
func TestOpenAPI_Routes(t *testing.T) {
	spec := loadSpec(t)
	served := map[string]bool{"GET /metrics": true}
	for _, app := range []*appliance.App{newTestApp(t, "", nil).app, newHostedApp(t).app} {
		for _, r := range routerRoutes(t, app) {
			_, path, _ := strings.Cut(r, " ")
			if path == "/" || strings.HasPrefix(path, webui.Prefix+"/") {
				continue
			}
			served[r] = true
		}
	}
	described := spec.routes()
	for r := range served {
		if !slices.Contains(described, r) {
			t.Errorf("%s is served but not in the OpenAPI description (webui/manual/openapi.yaml)", r)
		}
	}
	for _, r := range described {
		if !served[r] {
			t.Errorf("%s is in the OpenAPI description but not served", r)
		}
	}
	if len(served) < 40 {
		t.Errorf("only %d routes found: reading the router is broken", len(served))
	}
}

// Ensure that the description's error codes, and the HTTP API page's
// table of them, are the gateway's one table of codes and statuses.
func TestOpenAPI_ErrorCodes(t *testing.T) {
	spec := loadSpec(t)
	table := web.Statuses()
	enum := spec.doc["components"].(map[string]any)["schemas"].(map[string]any)["ErrorCode"].(map[string]any)["enum"].([]any)
	var listed []string
	for _, c := range enum {
		listed = append(listed, c.(string))
	}
	codes := slices.Sorted(func(yield func(string) bool) {
		for c := range table {
			if !yield(c) {
				return
			}
		}
	})
	if *updateCodes {
		writeCodes(t, codes, want(table, codes))
		return
	}
	if !slices.Equal(slices.Sorted(slices.Values(listed)), codes) {
		t.Errorf("components.schemas.ErrorCode.enum of openapi.yaml is not web.Statuses' codes (-update-codes rewrites it):\n got %v\nwant %v", listed, codes)
	}
	pageTable := want(table, codes)
	page, err := os.ReadFile("../webui/manual/api.md")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?s)<!-- error codes:[^>]*-->\n(.*?)<!-- end error codes -->`).FindSubmatch(page)
	if m == nil || string(m[1]) != pageTable {
		t.Errorf("webui/manual/api.md's table of error codes is not web.Statuses (go test ./appliance -run TestOpenAPI_ErrorCodes -update-codes rewrites it); it should read:\n%s", pageTable)
	}
}

// Ensure that real answers of a dev gateway (the README's walkthrough and
// its neighbours) match the description, and that the gateway serves the
// description itself.
func TestOpenAPI_DevAnswers(t *testing.T) {
	spec := loadSpec(t)
	ta := newTestApp(t, "", nil)
	do := func(method, path, body string) []byte {
		t.Helper()
		var rd io.Reader
		if body != "" {
			rd = strings.NewReader(body)
		}
		req, _ := http.NewRequest(method, ta.srv.URL+path, rd)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if err := spec.check(method, path, resp.StatusCode, resp.Header, b); err != nil {
			t.Error(err)
		}
		return b
	}
	served := do("GET", webui.OpenAPIPath, "")
	if want, _ := webui.OpenAPI(); !bytes.Equal(served, want) {
		t.Errorf("GET %s is not the description", webui.OpenAPIPath)
	}
	invoice := `{"mandate": "alice/bookkeeping-q4", "agent": "holon-labs/invoice-pipeline",
		"input": {"text": "ACME Corp\nWidgets, 2, 10.00\nGadgets, 1, 25.50\nShipping, 1, 5.00"}}`
	for _, r := range []struct{ method, path, body string }{
		{"GET", "/healthz", ""},
		{"GET", "/metrics", ""},
		{"GET", "/v0/accounts", ""},
		{"GET", "/v0/mandates", ""},
		{"GET", "/v0/mandates/alice/bookkeeping-q4", ""},
		{"GET", "/v0/mandates/alice/nothing", ""},
		{"GET", "/v0/agents?mandate=alice/bookkeeping-q4", ""},
		{"GET", "/v0/agents?q=table&limit=1", ""},
		{"GET", "/v0/agents/holon-labs/text-tables", ""},
		{"GET", "/v0/agents/holon-labs/text-tables@1.0.0", ""},
		{"GET", "/v0/agents/nobody/nothing", ""},
		{"GET", "/v0/catalog?limit=2", ""},
		{"POST", "/v0/calls", invoice},
		{"GET", "/v0/approvals", ""},
		{"GET", "/v0/approvals/a1", ""},
		{"POST", "/v0/approvals/a1", `{}`},
		{"POST", "/v0/approvals/a1", `{}`},
		{"GET", "/v0/receipts", ""},
		{"GET", "/v0/receipts?mandate=alice/bookkeeping-q4&billed=true", ""},
		{"GET", "/v0/receipts/r2", ""},
		{"GET", "/v0/receipts/r999", ""},
		{"POST", "/v0/calls", `{"mandate": "alice/bookkeeping-q4", "agent": "holon-labs/text-tables", "input": {"text": "no table"}}`},
		{"POST", "/v0/calls", `{"mandate": "alice/bookkeeping-q4", "agent": "holon-labs/text-tables", "input": {"txt": 1}}`},
		{"POST", "/v0/calls", `{"mandate": "alice/bookkeeping-q4", "agent": "nobody/nothing", "input": {}}`},
		{"POST", "/v0/calls", `{"mandate": "alice/bookkeeping-q4", "agnt": "x"}`},
		{"POST", "/v0/calls", `not json`},
		{"POST", "/v0/files?mandate=alice/bookkeeping-q4", "a,b\nc,d\n"},
		{"GET", "/v0/files", ""},
		{"GET", "/v0/files/000000000000000000000000?exp=1&sig=x", ""},
		{"GET", "/v0/admin/health", ""},
		{"POST", "/v0/demo/holon-labs/text-tables", `{"input": {"text": "a,b\nc,d"}}`},
	} {
		do(r.method, r.path, r.body)
	}
}

// Ensure that real answers of a hosted gateway match the description:
// accounts, keys, mandates, calls with Idempotency-Keys, files,
// moderation, sign-in and OAuth, and their refusals.
func TestOpenAPI_HostedAnswers(t *testing.T) {
	spec := loadSpec(t)
	ta := newHostedApp(t)
	ann := ta.signup("ann")
	ta.signup("bob")
	anon, admin := ta.anonymous(), ta.admin()
	ann.human.do("GET", "/v0/me", nil)
	ann.agent.do("GET", "/v0/me", nil)
	ann.human.do("GET", "/v0/mandates", nil)
	ann.createMandate("ann/books", map[string]any{"currency": "EUR", "budget": map[string]any{"total": "2.00", "per_call": "1.00"},
		"allow": map[string]any{"agents": []any{"holon-labs/*"}}})
	ann.human.do("POST", "/v0/mandates", map[string]any{"id": "bob/theirs", "currency": "EUR", "budget": map[string]any{"total": "1.00"}})
	ann.human.do("POST", "/v0/mandates", map[string]any{"id": "ann/books", "currency": "EUR", "budget": map[string]any{"total": "1.00"}})
	key, prefix := ann.newAgentKey("ann/books")
	key.do("POST", "/v0/calls", lookup(""))
	key.with("Idempotency-Key", "k-1").do("POST", "/v0/calls", lookup(""))
	key.with("Idempotency-Key", "k-1").do("POST", "/v0/calls", lookup(""))
	key.with("Idempotency-Key", "k-1").do("POST", "/v0/calls", map[string]any{"agent": "holon-labs/company-lookup", "input": map[string]any{"name": "Other"}})
	ann.agent.do("POST", "/v0/calls", map[string]any{"agent": "holon-labs/invoice-pipeline", "input": map[string]any{"text": "ACME Corp\nWidgets, 2, 10.00"}})
	ann.human.do("GET", "/v0/approvals", nil)
	ann.human.do("POST", "/v0/approvals/a1", map[string]any{"decision": "reject"})
	ann.human.do("GET", "/v0/receipts?limit=5", nil)
	ann.human.do("GET", "/v0/receipts/r1", nil)
	ann.human.do("GET", "/v0/accounts", nil)
	ann.human.do("DELETE", "/v0/keys/"+prefix, nil)
	ann.human.do("DELETE", "/v0/keys/hlk_a_nothing0", nil)
	key.do("GET", "/v0/me", nil)
	ann.human.raw("POST", "/v0/files", []byte("a,b\nc,d\n"))
	ann.human.do("GET", "/v0/files", nil)
	ann.human.do("GET", "/v0/me/agents", nil)
	ann.human.do("GET", "/v0/me/credentials", nil)
	ann.human.do("PUT", "/v0/agents/bob/thing/credential", map[string]any{"token": "x"})
	ann.human.do("POST", "/v0/agents", map[string]any{"id": "ann/thing", "version": "1.0.0"})
	ann.human.do("POST", "/v0/agents/draft", map[string]any{"name": "thing", "endpoint": "http://127.0.0.1:1/", "input": map[string]any{}})
	ann.human.do("GET", "/v0/oauth/authorization?client_id=nobody", nil)
	anon.do("POST", "/v0/signup", map[string]any{"handle": "ann", "email": "other@example.com"})
	anon.do("POST", "/v0/signup", map[string]any{"handle": "A!", "email": "x"})
	anon.do("GET", "/v0/me", nil)
	anon.do("GET", "/v0/catalog", nil)
	anon.do("GET", "/v0/agents?q=lookup", nil)
	anon.do("POST", "/v0/auth/exchange", map[string]any{"code": "nothing"})
	anon.raw("GET", "/v0/auth/github", nil)
	anon.do("GET", "/.well-known/oauth-protected-resource", nil)
	anon.do("GET", "/.well-known/oauth-protected-resource/mcp", nil)
	anon.do("GET", "/.well-known/oauth-authorization-server", nil)
	anon.do("POST", "/oauth/register", map[string]any{"redirect_uris": []any{"http://127.0.0.1:9/cb"}, "client_name": "test"})
	anon.raw("POST", "/oauth/token", []byte("grant_type=authorization_code&code=x"))
	admin.do("POST", "/v0/admin/credit", map[string]any{"account": "ann", "amount": "1.00", "reason": "test"})
	admin.do("GET", "/v0/admin/accounts?q=ann", nil)
	admin.do("GET", "/v0/admin/health", nil)
	admin.do("POST", "/v0/admin/agents/holon-labs/company-lookup@1.0.0/yank", map[string]any{"reason": "test"})
	admin.do("POST", "/v0/admin/accounts/bob/disable", map[string]any{"reason": "test"})
	admin.do("GET", "/v0/admin/log", nil)
	admin.do("GET", "/v0/accounts", nil)
	admin.raw("GET", "/v0/admin/backup", nil)
	admin.raw("GET", "/metrics", nil)
	if n := spec.checkTranscript(t, ta); n < 50 {
		t.Errorf("only %d answers checked", n)
	}
}

// want is the API page's table of codes by status.
func want(table map[string]int, codes []string) string {
	byStatus := map[int][]string{}
	for _, c := range codes {
		byStatus[table[c]] = append(byStatus[table[c]], "`"+c+"`")
	}
	var b strings.Builder
	b.WriteString("| status | codes |\n|---|---|\n")
	statuses := make([]int, 0, len(byStatus))
	for s := range byStatus {
		statuses = append(statuses, s)
	}
	sort.Ints(statuses)
	for _, s := range statuses {
		fmt.Fprintf(&b, "| %d | %s |\n", s, strings.Join(byStatus[s], ", "))
	}
	return b.String()
}

// writeCodes rewrites the codes of openapi.yaml and api.md.
func writeCodes(t *testing.T, codes []string, table string) {
	t.Helper()
	var enum strings.Builder
	for _, c := range codes {
		enum.WriteString("        - " + c + "\n")
	}
	for _, r := range []struct {
		file, re, repl string
	}{
		{"../webui/manual/openapi.yaml", `(?m)(^    ErrorCode:\n(?:      .*\n)*?      enum:\n)(?:        - .*\n)+`, enum.String()},
		{"../webui/manual/api.md", `(?s)(<!-- error codes:[^>]*-->\n).*?(<!-- end error codes -->)`, table},
	} {
		b, err := os.ReadFile(r.file)
		if err != nil {
			t.Fatal(err)
		}
		re := regexp.MustCompile(r.re)
		if !re.Match(b) {
			t.Fatalf("%s: no list of codes to rewrite", r.file)
		}
		b = re.ReplaceAll(b, []byte("${1}"+strings.ReplaceAll(r.repl, "$", "$$")+"${2}"))
		if err := os.WriteFile(r.file, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
