package appliance_test

import (
	"bytes"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"net/http"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"

	"holon.dev/holon"
	"holon.dev/holon/appliance"
	"holon.dev/holon/appliance/idempotency"
	"holon.dev/holon/appliance/signin"
	"holon.dev/holon/appliance/web"
	"holon.dev/holon/gateway/storetest"
	"holon.dev/holon/kv"
)

// errorCodes reads the error codes the Go files of dir (tests left out)
// use: every constant named Code…, and every string literal given as the
// code of holon.Errorf or of a holon.Error, so a code written out in
// place is found too. It maps each code to where it was seen.
func errorCodes(t *testing.T, dir string) map[string]string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	codes := map[string]string{}
	fset := token.NewFileSet()
	literal := func(e ast.Expr) (string, bool) {
		lit, ok := e.(*ast.BasicLit)
		if !ok || lit.Kind != token.STRING {
			return "", false
		}
		s, err := strconv.Unquote(lit.Value)
		return s, err == nil
	}
	// isHolon reports whether e names the root package's fn (holon.fn,
	// or fn in the root package itself).
	isHolon := func(e ast.Expr, fn string) bool {
		switch e := e.(type) {
		case *ast.Ident:
			return e.Name == fn && dir == ".."
		case *ast.SelectorExpr:
			x, ok := e.X.(*ast.Ident)
			return ok && x.Name == "holon" && e.Sel.Name == fn
		}
		return false
	}
	for _, path := range files {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.GenDecl:
				if n.Tok != token.CONST {
					return true
				}
				for _, spec := range n.Specs {
					vs := spec.(*ast.ValueSpec)
					for i, name := range vs.Names {
						if !strings.HasPrefix(name.Name, "Code") || i >= len(vs.Values) {
							continue
						}
						if s, ok := literal(vs.Values[i]); ok {
							codes[s] = fset.Position(name.Pos()).String()
						}
					}
				}
			case *ast.CallExpr:
				if isHolon(n.Fun, "Errorf") && len(n.Args) > 0 {
					if s, ok := literal(n.Args[0]); ok {
						codes[s] = fset.Position(n.Pos()).String()
					}
				}
			case *ast.CompositeLit:
				if !isHolon(n.Type, "Error") {
					return true
				}
				for _, el := range n.Elts {
					pair, ok := el.(*ast.KeyValueExpr)
					if k, isIdent := pair.Key.(*ast.Ident); ok && isIdent && k.Name == "Code" {
						if s, ok := literal(pair.Value); ok {
							codes[s] = fset.Position(n.Pos()).String()
						}
					}
				}
			}
			return true
		})
	}
	return codes
}

// Ensure that every error code the domain package, the gateway's rooms
// and the appliance declare (or write out in place) has a row in the one
// table of HTTP statuses (web.Status): a new code cannot fall
// through to some default.
func TestHTTPStatus_EveryCodeHasARow(t *testing.T) {
	codes := map[string]string{}
	dirs := []string{"..", "../gateway", "../gateway/contract", "../gateway/remote", ".", "../webui"}
	rooms, err := filepath.Glob("*/doc.go") // the appliance's rooms
	if err != nil {
		t.Fatal(err)
	}
	for _, doc := range rooms {
		dirs = append(dirs, filepath.Dir(doc))
	}
	for _, dir := range dirs {
		for code, at := range errorCodes(t, dir) {
			codes[code] = at
		}
	}
	if len(codes) < 60 {
		t.Fatalf("found %d codes, want them all (more than 60): the parse missed some", len(codes))
	}
	var missing []string
	for code, at := range codes {
		if s, ok := web.Status(code); !ok || s < 400 || s > 599 {
			missing = append(missing, code+" ("+at+")")
		}
	}
	sort.Strings(missing)
	for _, m := range missing {
		t.Errorf("no HTTP status for %s", m)
	}
	if _, ok := web.Status("no_such_code"); ok {
		t.Error("a code nobody declared has a status")
	}
}

// Ensure that the statuses gateway.md §5 names, and those the hosted API
// documents, are the table's.
func TestHTTPStatus_Spec(t *testing.T) {
	for code, want := range map[string]int{
		holon.CodeInvalidRequest:            400,
		holon.CodeInvalidMandate:            400,
		holon.CodeNotFound:                  404,
		holon.CodeOverBudget:                403,
		holon.CodeNotAllowed:                403,
		holon.CodeMandateInactive:           403,
		holon.CodeRejectedInput:             422,
		holon.CodeAgentError:                502,
		holon.CodeTimeout:                   502,
		holon.CodeRuntimeUnavailable:        502,
		holon.CodeGatewayError:              500,
		holon.CodeInvalidToken:              401,
		web.CodeUnauthenticated:             401,
		web.CodeForbidden:                   403,
		web.CodeRateLimited:                 429,
		web.CodeBodyTooLarge:                413,
		idempotency.CodeIdempotencyInFlight: 409,
		signin.CodeGitHubUnavailable:        503,
	} {
		if got, _ := web.Status(code); got != want {
			t.Errorf("%s: %d, want %d", code, got, want)
		}
	}
}

// Ensure that receipts the store cannot read (a row that does not decode)
// are answered 500 gateway_error, logged once, and not 400 invalid_request
// as if the client had asked wrongly; a bad cursor is still the client's
// 400.
func TestAPI_Receipts_UnreadableReceipt(t *testing.T) {
	ta := newHostedApp(t)
	carol := ta.signup("carol")
	carol.agent.must(http.StatusOK, "POST", "/v0/calls", lookup(""))
	carol.human.must(http.StatusOK, "GET", "/v0/receipts", nil)

	// A copy of the store whose receipts are cut short, as a torn or
	// corrupted page would leave them.
	var snap kv.Snapshot
	var rows []kv.Row
	err := kv.Unwrap(ta.app.Engine().Store()).Export(func(s kv.Snapshot) error { snap = s; return nil },
		func(bucket string, key, value []byte) error {
			if bucket == "receipts" {
				value = value[:len(value)/2]
			}
			rows = append(rows, kv.Row{Bucket: bucket, Key: bytes.Clone(key), Value: bytes.Clone(value)})
			return nil
		})
	if err != nil {
		t.Fatal(err)
	}
	corrupt := filepath.Join(t.TempDir(), "corrupt.db")
	if err := kv.Restore(corrupt, snap, func() (kv.Row, error) {
		if len(rows) == 0 {
			return kv.Row{}, io.EOF
		}
		r := rows[0]
		rows = rows[1:]
		return r, nil
	}); err != nil {
		t.Fatal(err)
	}
	ta.restart(func(c *appliance.Config) { c.DB = corrupt })
	ta.money = append(ta.money, storetest.SkipReceipts)

	for _, c := range []struct {
		who  client
		path string
	}{
		{carol.human, "/v0/receipts"},
		{carol.human, "/v0/receipts?mandate=carol/sandbox"},
		{carol.agent, "/v0/receipts"},
	} {
		before := ta.logs.String()
		status, out := c.who.do("GET", c.path, nil)
		if status != http.StatusInternalServerError || errorCode(out) != holon.CodeGatewayError {
			t.Errorf("GET %s of an unreadable receipt: %d %v, want 500 %s", c.path, status, out, holon.CodeGatewayError)
		}
		if msg := out["error"].(map[string]any)["message"].(string); strings.Contains(msg, "decode") || strings.Contains(msg, "receipts") {
			t.Errorf("GET %s told the client %q", c.path, msg)
		}
		logged := strings.TrimPrefix(ta.logs.String(), before)
		if n := strings.Count(logged, `"level":"ERROR"`); n != 1 || !strings.Contains(logged, "decode") {
			t.Errorf("GET %s logged %d errors, want 1 that says why: %s", c.path, n, logged)
		}
	}
	if status, out := carol.human.do("GET", "/v0/receipts?before=nope", nil); status != http.StatusBadRequest || errorCode(out) != holon.CodeInvalidRequest {
		t.Errorf("a bad cursor: %d %v, want 400 %s", status, out, holon.CodeInvalidRequest)
	}
}
