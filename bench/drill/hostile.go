package drill

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"holon.dev/holon/journal"
)

// hostile is one hostile request and what it must be answered.
type hostile struct {
	name         string
	method, path string
	key          string // the key sent ("" none)
	header       []string
	body         string
	status       int    // the status it must get
	code         string // and its error code ("" any named code)
}

// hostileDrill sends the real gateway what a hostile client would: broken,
// nested, huge and ambiguous JSON, invalid UTF-8, NUL characters, oversized
// and trickled bodies, catastrophic patterns, mandates that try to widen
// their parent, other accounts' ids on every endpoint, forged keys, tokens
// and X-Forwarded-For, odd Idempotency-Keys. Each must be answered with its
// status and a named code, with nothing stored or billed, while a normal
// client keeps calling (its p99 is measured before and during).
func hostileDrill(ctx context.Context, d *drill) error {
	agents, err := startAgents()
	if err != nil {
		return err
	}
	defer agents.close()
	mcpAgent, err := startUnitsAgent()
	if err != nil {
		return err
	}
	defer mcpAgent.close()
	registry := filepath.Join(d.dir, "registry")
	if err := mcpAgent.writeManifest(registry); err != nil {
		return err
	}
	specs := append(agents.standardAgents(), agentSpec{name: "regex", price: "0.01", timeout: 10, handler: agents.echo,
		input: `{type: object, properties: {s: {type: string, pattern: "^(a+)+$"}, t: {type: string, pattern: "^(a|aa)*$"}}}`})
	if err := agents.writeRegistry(registry, specs...); err != nil {
		return err
	}
	g, err := d.serve(ctx, registry, func(g *gatewayProc) { g.bodyTimeout = 2 * time.Second }, "HOLON_RATE_SIGNUP=5/h")
	if err != nil {
		return err
	}
	defer g.kill()
	db := g.db
	c := newAPI(g.url, 16)
	mal, err := c.signup(ctx, "mallory", g.adminKey, "")
	if err != nil {
		return err
	}
	ali, err := c.signup(ctx, "alice", g.adminKey, "")
	if err != nil {
		return err
	}
	bob, err := c.signup(ctx, "bob", g.adminKey, "100.00")
	if err != nil {
		return err
	}
	for _, a := range []*account{mal, ali, bob} {
		if err := c.mandate(ctx, a, "main", "50.00", "1.00", "0.50"); err != nil {
			return err
		}
	}
	// Alice's resources, for Mallory to aim at.
	aliCall, err := c.must(ctx, http.StatusOK, "POST", "/v0/calls", ali.human, map[string]any{"mandate": "alice/main", "agent": "drill/echo", "input": map[string]string{"n": "alice"}})
	if err != nil {
		return err
	}
	aliApproval, err := c.must(ctx, http.StatusAccepted, "POST", "/v0/calls", ali.human, map[string]any{"mandate": "alice/main", "agent": "drill/pricey", "input": map[string]string{"n": "alice"}})
	if err != nil || aliApproval.Approval == nil {
		return fmt.Errorf("alice's approval: %v", err)
	}
	aliKey, err := c.must(ctx, http.StatusCreated, "POST", "/v0/keys", ali.human, map[string]any{"mandate": "alice/main"})
	if err != nil {
		return err
	}
	aliPrefix := ""
	if i := strings.Index(string(aliKey.Body), `"hlk_a_`); i >= 0 {
		aliPrefix = string(aliKey.Body[i+1 : i+15])
	}
	// Alice's file, passed to an MCP agent, which is given its signed link;
	// Mallory's own file.
	aliFile, err := c.must(ctx, http.StatusCreated, "POST", "/v0/files", ali.human, `{"secret":"alice's"}`)
	if err != nil {
		return err
	}
	malFile, err := c.must(ctx, http.StatusCreated, "POST", "/v0/files", mal.human, `{"mine":1}`)
	if err != nil {
		return err
	}
	aliHandle, malHandle := fileHandle(aliFile.Body), fileHandle(malFile.Body)
	if _, err := c.must(ctx, http.StatusOK, "POST", "/v0/calls", ali.human, map[string]any{"mandate": "alice/main", "agent": "drill/files", "input": map[string]string{"doc": aliHandle}}); err != nil {
		return err
	}
	links := mcpAgent.fileLinks()
	if len(links) != 1 {
		return fmt.Errorf("the files agent was given %d links, want 1", len(links))
	}
	link := strings.TrimPrefix(links[0], g.url)
	before, err := c.must(ctx, http.StatusOK, "GET", "/v0/accounts", mal.human, nil)
	if err != nil {
		return err
	}

	// The bystander: Bob calls all along; his p99 before and during.
	by := &bystander{c: c, acc: bob}
	byCtx, stopBy := context.WithCancel(ctx)
	var byWG sync.WaitGroup
	byWG.Add(1)
	go func() { defer byWG.Done(); by.run(byCtx) }()
	time.Sleep(pick(0, d.o.Long, time.Second, 5*time.Second))
	baseline := by.cut()

	// Slow clients in the background: trickled bodies, trickled headers.
	var slowWG sync.WaitGroup
	slowN := pick(0, d.o.Long, 20, 200)
	for i := range slowN {
		slowWG.Add(1)
		go func() {
			defer slowWG.Done()
			d.slowLoris(ctx, g, mal, i%2 == 0)
		}()
	}

	call := func(body string) string { return body }
	valid := `"mandate":"mallory/main","agent":"drill/echo"`
	deep := strings.Repeat("[", 100000) + strings.Repeat("]", 100000)
	deepObj := strings.Repeat(`{"a":`, 20000) + "1" + strings.Repeat("}", 20000)
	cases := []hostile{
		{name: "invalid JSON", body: call(`{` + valid + `,"input":{"n":"x"}`), status: 400, code: "invalid_request"},
		{name: "deeply nested arrays (100,000)", body: call(`{` + valid + `,"input":` + deep + `}`), status: 400},
		{name: "deeply nested objects (20,000)", body: call(`{` + valid + `,"input":` + deepObj + `}`), status: 400},
		{name: "a number beyond float64 (1e400)", body: call(`{` + valid + `,"input":{"n":"x","ms":1e400}}`), status: 400},
		{name: "a 30-digit integer", body: call(`{` + valid + `,"input":{"n":"x","ms":123456789012345678901234567890}}`), status: 422},
		{name: "a max_cost beyond any amount", body: call(`{` + valid + `,"input":{"n":"x"},"max_cost":"99999999999999999999999.99"}`), status: 400},
		{name: "invalid UTF-8 in a string", body: call(`{` + valid + `,"input":{"n":"` + "\xff\xfe" + `"}}`), status: 400},
		{name: "a lone surrogate", body: call(`{` + valid + `,"input":{"n":"\ud800"}}`), status: 400},
		{name: "a raw NUL byte", body: call(`{` + valid + `,"input":{"n":"a` + "\x00" + `b"}}`), status: 400, code: "nul_character"},
		{name: "an escaped NUL", body: call(`{` + valid + `,"input":{"n":"a\u0000b"}}`), status: 400, code: "nul_character"},
		{name: "a duplicate key in the body", body: call(`{` + valid + `,"agent":"drill/pricey","input":{"n":"x"}}`), status: 400},
		{name: "a duplicate key in the input", body: call(`{` + valid + `,"input":{"n":"a","n":"b"}}`), status: 400},
		{name: "data after the object", body: call(`{` + valid + `,"input":{"n":"x"}} {"again":1}`), status: 400},
		{name: "a field name in another case", body: call(`{"Mandate":"mallory/main","agent":"drill/echo","input":{}}`), status: 400},
		{name: "an unknown field", body: call(`{` + valid + `,"input":{},"pay_to":"mallory"}`), status: 400},
		{name: "an input its schema refuses", body: call(`{` + valid + `,"input":{"n":5}}`), status: 422},
		{name: "a catastrophic pattern ^(a+)+$ on 50,000 a's and a !", body: call(`{"mandate":"mallory/main","agent":"drill/regex","input":{"s":"` + strings.Repeat("a", 50000) + `!"}}`), status: 422},
		{name: "a catastrophic pattern ^(a|aa)*$ on 50,000 a's and a b", body: call(`{"mandate":"mallory/main","agent":"drill/regex","input":{"t":"` + strings.Repeat("a", 50000) + `b"}}`), status: 422},
		{name: "a call under another account's mandate", body: `{"mandate":"alice/main","agent":"drill/echo","input":{"n":"x"}}`, status: 404},
		{name: "an Idempotency-Key of 256 characters", body: `{` + valid + `,"input":{"n":"x"}}`, header: []string{"Idempotency-Key", strings.Repeat("k", 256)}, status: 400, code: "invalid_idempotency_key"},
		{name: "an Idempotency-Key with a space", body: `{` + valid + `,"input":{"n":"x"}}`, header: []string{"Idempotency-Key", "a b"}, status: 400, code: "invalid_idempotency_key"},
		{name: "an Idempotency-Key not in ASCII", body: `{` + valid + `,"input":{"n":"x"}}`, header: []string{"Idempotency-Key", "ключ"}, status: 400, code: "invalid_idempotency_key"},
		{name: "a forged human key", body: `{` + valid + `,"input":{"n":"x"}}`, key: "hlk_h_" + strings.Repeat("a", 52), status: 401},
		{name: "a forged delegation token", body: `{"agent":"drill/echo","input":{"n":"x"}}`, key: "hld_" + strings.Repeat("A", 43), status: 401, code: "invalid_token"},
		{name: "a forged admin key", method: "POST", path: "/v0/admin/credit", body: `{"account":"mallory","amount":"100.00"}`, key: "adm_" + strings.Repeat("0", 48), status: 401},
		{name: "a human key on an admin endpoint", method: "POST", path: "/v0/admin/credit", body: `{"account":"mallory","amount":"100.00"}`, status: 403},
		{name: "a mandate with a parent (widening another)", method: "POST", path: "/v0/mandates", body: `{"id":"wide","parent":"alice/main","grantee":"mallory/bot","budget":{"total":"1000.00"}}`, status: 400, code: "invalid_mandate"},
		{name: "a mandate granted to another account", method: "POST", path: "/v0/mandates", body: `{"id":"gift","grantee":"alice/bot","budget":{"total":"1.00"}}`, status: 400, code: "invalid_mandate"},
		{name: "a mandate issued by another account", method: "POST", path: "/v0/mandates", body: `{"id":"forged","issuer":"alice","grantee":"mallory/bot","budget":{"total":"1.00"}}`, status: 400, code: "invalid_mandate"},
		{name: "a mandate with its own fx", method: "POST", path: "/v0/mandates", body: `{"id":"fx","grantee":"mallory/bot","budget":{"total":"1.00"},"fx":{"USD":"0.0001"}}`, status: 400, code: "invalid_mandate"},
		{name: "a mandate with a duplicate total", method: "POST", path: "/v0/mandates", body: `{"id":"dup","grantee":"mallory/bot","budget":{"total":"0.10","total":"4000.00"}}`, status: 400},
		{name: "another account's receipt", method: "GET", path: "/v0/receipts/" + aliCall.Receipt.ID, status: 404, code: "not_found"},
		{name: "another account's receipts listing", method: "GET", path: "/v0/receipts?mandate=alice/main", status: 404},
		{name: "another account's approval", method: "GET", path: "/v0/approvals/" + aliApproval.Approval.ID, status: 404, code: "not_found"},
		{name: "deciding another account's approval", method: "POST", path: "/v0/approvals/" + aliApproval.Approval.ID, body: `{}`, status: 404, code: "not_found"},
		{name: "another account's mandate", method: "GET", path: "/v0/mandates/alice/main", status: 404, code: "not_found"},
		{name: "a key under another account's mandate", method: "POST", path: "/v0/keys", body: `{"mandate":"alice/main"}`, status: 404},
		{name: "revoking another account's key", method: "DELETE", path: "/v0/keys/" + aliPrefix, status: 404},
		{name: "a NUL in the path", method: "GET", path: "/v0/receipts/r1%00", status: 400, code: "nul_character"},
		{name: "a NUL in the query", method: "GET", path: "/v0/receipts?mandate=mallory/main%00", status: 400, code: "nul_character"},
	}
	tampered, control := d.tamperedLinks(link, aliHandle, malHandle)
	cases = append(cases, tampered...)
	for i := range cases {
		h := &cases[i]
		if h.method == "" {
			h.method, h.path = "POST", "/v0/calls"
		}
		switch h.key {
		case "":
			h.key = mal.human
		case "none":
			h.key = ""
		}
		d.hostileOne(ctx, c, h)
	}
	if control != "" {
		a, err := c.do(ctx, "GET", control, "", nil)
		d.check("a genuine signed link is served (the control)", err == nil && a.Status == http.StatusOK && strings.Contains(string(a.Body), "alice's"), "%v %v", err, answerBody(a))
	}
	d.oversized(ctx, g, mal)
	d.forgedXFF(ctx, c)

	slowWG.Wait()
	during := by.cut()
	stopBy()
	byWG.Wait()
	d.note("bystander p99: %s before the attack (%d calls), %s during it (%d calls), %d of its calls failed", ms(baseline.p(0.99)), len(baseline.d), ms(during.p(0.99)), len(during.d), by.failed())
	d.check("the bystander's calls all succeed meanwhile", by.failed() == 0, "%d failed", by.failed())
	d.count("bystander calls answered 200", int64(len(baseline.d)+len(during.d)))
	d.floor("bystander calls answered 200", 10)
	d.check("the bystander's p99 stays under 2s meanwhile", during.p(0.99) < 2*time.Second, "p99 %s", during.p(0.99))

	after, err := c.must(ctx, http.StatusOK, "GET", "/v0/accounts", mal.human, nil)
	if err != nil {
		return err
	}
	d.check("nothing billed to the attacker", string(after.Body) == string(before.Body), "before %s, after %s", before.Body, after.Body)
	if st, err := c.mandateState(ctx, mal.human, "mallory/main"); err == nil {
		d.check("nothing reserved or spent under the attacker's mandate", st.Spent == "0.00" && st.Reserved == "0.00", "%+v", st)
	}
	if a, err := c.must(ctx, http.StatusOK, "GET", "/v0/mandates", mal.human, nil); err == nil {
		d.check("no refused mandate was stored", !strings.Contains(string(a.Body), "mallory/wide") && !strings.Contains(string(a.Body), "mallory/gift") &&
			!strings.Contains(string(a.Body), "mallory/forged") && !strings.Contains(string(a.Body), "mallory/fx") && !strings.Contains(string(a.Body), "mallory/dup"), "%.500s", a.Body)
	}
	if a, err := c.must(ctx, http.StatusOK, "GET", "/v0/approvals/"+aliApproval.Approval.ID, ali.human, nil); err == nil {
		d.check("the victim's approval is untouched", strings.Contains(string(a.Body), `"pending"`), "%.300s", a.Body)
	}
	if err := g.stop(); err != nil {
		return err
	}
	v, err := d.checkStore(ctx, db, map[string]journal.Amount{"mallory/main": journal.MustParseAmount("50.00")})
	if err != nil {
		return err
	}
	for id, r := range v.receipts {
		// A call refused for its input (rejected) or for another's file
		// (failed, file_not_found) keeps its unbilled receipt, as every
		// call does (gateway.md §4); nothing of it is billed.
		refused := r.Status == "rejected" || r.Status == "failed" && r.Error != nil && *r.Error == "file_not_found"
		d.check("a hostile request leaves at most its unbilled refusal", r.Payer != "mallory" || refused && !r.Billed,
			"%s: %s/%s billed=%v", id, r.Status, deref(r.Error), r.Billed)
	}
	return nil
}

// hostileOne sends one hostile request and checks its answer.
func (d *drill) hostileOne(ctx context.Context, c *api, h *hostile) {
	t := time.Now()
	a, err := c.do(ctx, h.method, h.path, h.key, []byte(h.body), h.header...)
	took := time.Since(t)
	d.count("hostile inputs tried", 1)
	if !d.check("a hostile input is answered", err == nil, "%s: %v", h.name, err) {
		return
	}
	code := a.code()
	ok := (a.Status == h.status || h.status == 0 && a.Status >= 400 && a.Status < 500) && code != "" && a.Error.Message != "" && (h.code == "" || code == h.code)
	d.check("a hostile input gets its status and a named code", ok, "%s: %d %s, want %d %s: %.300s", h.name, a.Status, code, h.status, h.code, a.Body)
	d.check("a hostile input is answered within 2s", took < 2*time.Second, "%s took %s", h.name, took)
	d.note("%-60s → %d %s (%s)", h.name, a.Status, code, ms(took))
}

// fileHandle is the holon://files/<id> of a POST /v0/files answer.
func fileHandle(body []byte) string {
	var f struct {
		File string `json:"file"`
	}
	_ = json.Unmarshal(body, &f)
	return f.File
}

// tamperedLinks are a genuine signed link of Alice's file (the control:
// it must be served) and the ways Mallory could alter it, each refused
// 403; and Mallory passing Alice's file handle in a call.
func (d *drill) tamperedLinks(link, aliHandle, malHandle string) (tampered []hostile, control string) {
	u, err := url.Parse(link)
	if err != nil {
		d.check("a signed link parses", false, "%q: %v", link, err)
		return nil, ""
	}
	q := u.Query()
	sig, exp := q.Get("sig"), q.Get("exp")
	flipped := []byte(sig)
	if len(flipped) > 0 {
		if flipped[0] == 'A' {
			flipped[0] = 'B'
		} else {
			flipped[0] = 'A'
		}
	}
	aliID := strings.TrimPrefix(aliHandle, "holon://files/")
	malID := strings.TrimPrefix(malHandle, "holon://files/")
	later := exp + "0" // ten times further away
	if n, err := strconv.ParseInt(exp, 10, 64); err == nil {
		later = strconv.FormatInt(n+86400, 10)
	}
	path := func(id, e, s string) string {
		v := url.Values{}
		if e != "" {
			v.Set("exp", e)
		}
		if s != "" {
			v.Set("sig", s)
		}
		return "/v0/files/" + id + "?" + v.Encode()
	}
	return []hostile{
		{name: "a signed link with its signature altered", method: "GET", path: path(aliID, exp, string(flipped)), key: "none", status: 403},
		{name: "a signed link with its expiry pushed back a day", method: "GET", path: path(aliID, later, sig), key: "none", status: 403},
		{name: "a signed link moved to another file", method: "GET", path: path(malID, exp, sig), key: "none", status: 403},
		{name: "a signed link without its signature", method: "GET", path: path(aliID, exp, ""), key: "none", status: 403},
		{name: "a signed link without its expiry", method: "GET", path: path(aliID, "", sig), key: "none", status: 403},
		{name: "another account's file handle in a call", body: `{"mandate":"mallory/main","agent":"drill/files","input":{"doc":"` + aliHandle + `"}}`, code: "file_not_found"},
	}, path(aliID, exp, sig)
}

// oversized sends a 64 MB body to every endpoint, and wants each answered
// before the body was all sent: refused (413 body_too_large where the body
// is read) without being read whole.
func (d *drill) oversized(ctx context.Context, g *gatewayProc, mal *account) {
	type ep struct{ method, path, key string }
	eps := []ep{
		{"POST", "/v0/calls", mal.human}, {"POST", "/v0/signup", ""}, {"POST", "/v0/mandates", mal.human},
		{"POST", "/v0/keys", mal.human}, {"POST", "/v0/approvals/a1", mal.human}, {"POST", "/v0/admin/credit", g.adminKey},
		{"POST", "/v0/admin/accounts/mallory/disable", g.adminKey}, {"POST", "/v0/admin/agents/drill/echo@1.0.0/yank", g.adminKey},
		{"POST", "/mcp", mal.agent},
		{"GET", "/v0/agents", ""}, {"GET", "/v0/receipts", mal.human}, {"GET", "/v0/me", mal.human}, {"GET", "/v0/mandates", mal.human},
		{"GET", "/v0/accounts", mal.human}, {"GET", "/v0/approvals", mal.human}, {"DELETE", "/v0/keys/hlk_a_00000000", mal.human},
	}
	const size = 64 << 20
	for _, e := range eps {
		d.count("oversized bodies sent (64 MB declared)", 1)
		status, sent, body, err := sendHuge(ctx, g.addr, e.method, e.path, e.key, size)
		name := e.method + " " + e.path
		if !d.check("an oversized body is answered", err == nil, "%s: %v", name, err) {
			continue
		}
		d.check("an oversized body is refused without being read whole", sent < size && status != 0, "%s: answered %d after %d MB sent", name, status, sent>>20)
		if e.method == "POST" {
			d.check("an oversized body gets 413 (or is refused before it is read)", status == 413 || status == 401 || status == 404 || status == 403,
				"%s: %d", name, status)
		}
		d.note("64 MB to %-44s → %d after %d MB sent: %.80s", name, status, sent>>20, strings.TrimSpace(body))
	}
}

// sendHuge writes a request declaring size bytes of body and writes the
// body until the server answers; it returns the status and how much was
// sent by then.
func sendHuge(ctx context.Context, addr, method, path, key string, size int64) (int, int64, string, error) {
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return 0, 0, "", err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(30 * time.Second))
	auth := ""
	if key != "" {
		auth = "Authorization: Bearer " + key + "\r\n"
	}
	if _, err := fmt.Fprintf(conn, "%s %s HTTP/1.1\r\nHost: drill\r\n%sContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: %d\r\n\r\n", method, path, auth, size); err != nil {
		return 0, 0, "", err
	}
	var mu sync.Mutex
	var sent int64
	stop := make(chan struct{})
	go func() {
		chunk := []byte(`{"n":"` + strings.Repeat("x", 64<<10-6))
		for {
			select {
			case <-stop:
				return
			default:
			}
			n, err := conn.Write(chunk)
			mu.Lock()
			sent += int64(n)
			done := sent >= size
			mu.Unlock()
			if err != nil || done {
				return
			}
		}
	}()
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	mu.Lock()
	at := sent
	mu.Unlock()
	close(stop)
	if err != nil {
		return 0, at, "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 200))
	return resp.StatusCode, at, string(b), nil
}

// slowLoris trickles a request's body (or its header) a byte at a time and
// wants the connection cut within the server's bounds: --body-timeout for
// a body, ReadHeaderTimeout (10s) for a header.
func (d *drill) slowLoris(ctx context.Context, g *gatewayProc, mal *account, body bool) {
	conn, err := net.DialTimeout("tcp", g.addr, 5*time.Second)
	if err != nil {
		d.check("a slow client can connect", false, "%v", err)
		return
	}
	defer conn.Close()
	bound := g.bodyTimeout + 3*time.Second
	what := "a trickled body is cut within --body-timeout"
	head := fmt.Sprintf("POST /v0/calls HTTP/1.1\r\nHost: drill\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n", mal.human)
	if !body {
		bound = 10*time.Second + 3*time.Second
		what = "a trickled header is cut within ReadHeaderTimeout"
		head = "POST /v0/calls HTTP/1.1\r\nHost: drill\r\n"
	}
	t := time.Now()
	if _, err := conn.Write([]byte(head)); err != nil {
		return
	}
	d.count("slow clients (slow-loris: trickled bodies and headers)", 1)
	cut := make(chan struct{})
	go func() {
		buf := make([]byte, 4096)
		for {
			_ = conn.SetReadDeadline(time.Now().Add(bound + 5*time.Second))
			if _, err := conn.Read(buf); err != nil {
				close(cut)
				return
			}
		}
	}()
	for {
		select {
		case <-cut:
			took := time.Since(t)
			d.check(what, took < bound, "cut after %s, bound %s", took, bound)
			return
		case <-ctx.Done():
			return
		case <-time.After(300 * time.Millisecond):
			if body {
				_, _ = conn.Write([]byte("{"))
			} else {
				_, _ = conn.Write([]byte("X"))
			}
		}
	}
}

// forgedXFF signs up from one address with a new X-Forwarded-For each time:
// the gateway (not behind a trusted proxy) limits the address it sees, so
// with HOLON_RATE_SIGNUP=5/h and 3 signups made, the 3rd forged one is
// refused 429 rate_limited.
func (d *drill) forgedXFF(ctx context.Context, c *api) {
	var got []int
	for i := range 4 {
		a, err := c.do(ctx, "POST", "/v0/signup", "", fmt.Sprintf(`{"handle":"xff-%d","email":"xff%d@drill.example"}`, i, i),
			"X-Forwarded-For", fmt.Sprintf("203.0.113.%d", i+1))
		d.count("hostile inputs tried", 1)
		if err != nil {
			got = append(got, 0)
			continue
		}
		got = append(got, a.Status)
		if a.Status == http.StatusTooManyRequests {
			d.check("a rate-limited answer names rate_limited", a.code() == "rate_limited", "%.200s", a.Body)
		}
	}
	d.check("a forged X-Forwarded-For buys no more signups", slices.Equal(got, []int{201, 201, 429, 429}), "statuses %v, want [201 201 429 429]", got)
}

// bystander is a normal client calling throughout a drill.
type bystander struct {
	c   *api
	acc *account
	mu  sync.Mutex
	lat latencies
	bad int
}

func (b *bystander) run(ctx context.Context) {
	for i := 0; ctx.Err() == nil; i++ {
		t := time.Now()
		a, err := b.c.call(ctx, b.acc.human, b.acc.handle+"/main", "drill/echo", agentInput{N: fmt.Sprintf("by-%d", i)}, "")
		d := time.Since(t)
		if ctx.Err() != nil {
			return
		}
		b.mu.Lock()
		if err != nil || a.Status != http.StatusOK {
			b.bad++
		} else {
			b.lat.d = append(b.lat.d, d)
		}
		b.mu.Unlock()
		time.Sleep(5 * time.Millisecond)
	}
}

// cut returns the latencies so far and starts a new series.
func (b *bystander) cut() latencies {
	b.mu.Lock()
	defer b.mu.Unlock()
	l := b.lat
	b.lat = latencies{}
	return l
}

func (b *bystander) failed() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.bad
}

// latencies is a series of request times.
type latencies struct{ d []time.Duration }

// p is the q-quantile (0 when empty).
func (l latencies) p(q float64) time.Duration {
	if len(l.d) == 0 {
		return 0
	}
	s := slices.Clone(l.d)
	slices.Sort(s)
	return s[min(len(s)-1, int(q*float64(len(s))))]
}

func ms(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d.Microseconds())/1000) }
