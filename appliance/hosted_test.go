package appliance_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/time/rate"

	"holon.dev/holon/appliance"
	"holon.dev/holon/backup"
	"holon.dev/holon/gateway"
	"holon.dev/holon/gateway/storetest"
	"holon.dev/holon/journal"
	"holon.dev/holon/kv"
)

// testAdminKey is the operator's key in hosted tests.
const testAdminKey = "adm-Q8v2Lr7tKx4Nw9Zp3Hc6Fm1Jd5Gs0Bya"

// testRegistry is a registry directory of agents that are not shipped:
// test-lab/slow runs until its test lets it go, test-lab/echo (two
// versions) answers with its input.
var testRegistry = map[string]string{
	"slow.yaml": `
id: test-lab/slow
version: 1.0.0
summary: Waits until the test lets it go, then answers with its input.
license: Apache-2.0
source: { repository: "https://github.com/test-lab/agents", commit: "0000000000000000000000000000000000000000" }
capabilities: [test.slow]
interface:
  input: { type: object, required: [n], additionalProperties: false, properties: { n: { type: integer } } }
  output: { type: object, required: [n], properties: { n: { type: integer } } }
pricing: { model: per_run, amount: "0.01", currency: EUR }
runtime: { kind: dev, tool: slow }
data: { retention: none, regions: [eu], training: false }
`,
	"echo-1.0.0.yaml": echoManifest("test-lab", "1.0.0"),
	"echo-1.1.0.yaml": echoManifest("test-lab", "1.1.0"),
}

func echoManifest(ns, version string) string {
	return `
id: ` + ns + `/echo
version: ` + version + `
summary: Answers with its input.
license: Apache-2.0
source: { repository: "https://github.com/` + ns + `/agents", commit: "0000000000000000000000000000000000000000" }
capabilities: [test.echo]
interface:
  input: { type: object, required: [text], additionalProperties: false, properties: { text: { type: string } } }
  output: { type: object, required: [text], properties: { text: { type: string } } }
pricing: { model: per_run, amount: "0.02", currency: EUR }
runtime: { kind: dev, tool: echo }
data: { retention: none, regions: [eu], training: false }
`
}

// writeRegistry writes manifests into a new directory.
func writeRegistry(t testing.TB, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// lockedBuffer is a log sink safe for concurrent handlers.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// exchange is one request and its answer, as a client saw them.
type exchange struct {
	method, path string
	status       int
	header       http.Header
	body         []byte
}

// hostedApp is a hosted appliance served on loopback, with its logs
// captured, the slow agent under the test's control, and a transcript of
// every exchange.
type hostedApp struct {
	t    testing.TB
	cfg  appliance.Config
	app  *appliance.App
	srv  *httptest.Server
	logs *lockedBuffer

	// started receives one value each time the slow agent starts a run;
	// closing release lets every run of it finish.
	started     chan struct{}
	release     chan struct{}
	releaseOnce sync.Once

	mu         sync.Mutex
	transcript []exchange

	// money relaxes the money check at shutdown, for a test with a
	// reason to (storetest.SkipReceipts on a store cut short on purpose).
	money []storetest.Option
}

// unlimited are rate limits that never refuse: tests of other things
// must not trip over them.
var unlimited = appliance.Limits{
	Account:    appliance.Limit{Rate: rate.Inf},
	Address:    appliance.Limit{Rate: rate.Inf},
	Signup:     appliance.Limit{Rate: rate.Inf},
	MaxTracked: 1000,
}

// newHostedApp opens a hosted appliance on a fresh store with the shipped,
// demo and test agents. Options adjust the configuration. On cleanup it
// checks the money invariants, as newTestApp does.
func newHostedApp(t testing.TB, opts ...func(*appliance.Config)) *hostedApp {
	t.Helper()
	ta := &hostedApp{t: t, logs: &lockedBuffer{}, started: make(chan struct{}, 1000), release: make(chan struct{})}
	ta.cfg = appliance.Config{OpenStore: kv.OpenStore, Backup: backup.StoreHandler,
		DB:           filepath.Join(t.TempDir(), "holon.db"),
		Registry:     []string{"agents", "examples", writeRegistry(t, testRegistry)},
		SignupCredit: journal.MustParseAmount("5.00"),
		NoSync:       true,
		Hosted:       true,
		AdminKey:     testAdminKey,
		Limits:       unlimited,
		Logger:       slog.New(slog.NewJSONHandler(ta.logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		DevHandlers: map[string]gateway.DevHandler{
			"slow": func(ctx context.Context, input json.RawMessage, c *gateway.Ctx) (any, error) {
				if err := c.Durable(); err != nil { // telling the test leaves the agent
					return nil, err
				}
				ta.started <- struct{}{}
				select {
				case <-ta.release:
				case <-ctx.Done():
					return nil, ctx.Err()
				}
				return input, nil
			},
			"echo": func(ctx context.Context, input json.RawMessage, c *gateway.Ctx) (any, error) {
				return input, nil
			},
		},
	}
	for _, o := range opts {
		o(&ta.cfg)
	}
	ta.open()
	t.Cleanup(func() {
		ta.letGo()
		ta.shutdown(true)
		// Every answer the test saw is one the OpenAPI description
		// describes (openapi_test.go).
		loadSpec(t).checkTranscript(t, ta)
	})
	return ta
}

func (ta *hostedApp) open() {
	ta.t.Helper()
	app, err := appliance.Open(context.Background(), ta.cfg)
	if err != nil {
		ta.t.Fatal(err)
	}
	ta.app = app
	ta.srv = httptest.NewServer(app.Handler())
}

// shutdown stops serving and closes the appliance, checking the money
// first when asked.
func (ta *hostedApp) shutdown(check bool) {
	if ta.app == nil {
		return
	}
	ta.srv.Close()
	if check {
		storetest.CheckMoney(ta.t, ta.app.Engine().Store(), ta.money...)
	}
	if err := ta.app.Close(); err != nil {
		ta.t.Error(err)
	}
	ta.app = nil
}

// restart closes the appliance and opens it again on the same store (and
// the same configuration, changed by opts).
func (ta *hostedApp) restart(opts ...func(*appliance.Config)) {
	ta.t.Helper()
	ta.shutdown(true)
	for _, o := range opts {
		o(&ta.cfg)
	}
	ta.open()
}

// letGo lets every run of the slow agent finish.
func (ta *hostedApp) letGo() { ta.releaseOnce.Do(func() { close(ta.release) }) }

// waitStarted waits for the slow agent to start one run.
func (ta *hostedApp) waitStarted() {
	ta.t.Helper()
	select {
	case <-ta.started:
	case <-time.After(10 * time.Second):
		ta.t.Fatal("the slow agent did not start")
	}
}

// client sends requests as one principal: a key, the admin key, or none.
type client struct {
	ta     *hostedApp
	key    string
	header http.Header
}

func (ta *hostedApp) as(key string) client { return client{ta: ta, key: key} }

func (ta *hostedApp) anonymous() client { return client{ta: ta} }

func (ta *hostedApp) admin() client { return client{ta: ta, key: testAdminKey} }

// with returns a client that also sends a header.
func (c client) with(name, value string) client {
	h := c.header.Clone()
	if h == nil {
		h = http.Header{}
	}
	h.Add(name, value)
	c.header = h
	return c
}

// raw sends a request and returns its status, headers and body. It is safe
// for concurrent use and records the exchange.
func (c client) raw(method, path string, body []byte) (int, http.Header, []byte) {
	c.ta.t.Helper()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequest(method, c.ta.srv.URL+path, rd)
	if err != nil {
		c.ta.t.Fatal(err)
	}
	for k, vs := range c.header {
		req.Header[k] = vs
	}
	if c.key != "" {
		req.Header.Set("Authorization", "Bearer "+c.key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.ta.t.Errorf("%s %s: %v", method, path, err)
		return 0, nil, nil
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		c.ta.t.Errorf("%s %s: read: %v", method, path, err)
	}
	c.ta.mu.Lock()
	c.ta.transcript = append(c.ta.transcript, exchange{method: method, path: path, status: resp.StatusCode, header: resp.Header, body: b})
	c.ta.mu.Unlock()
	return resp.StatusCode, resp.Header, b
}

// do sends body as JSON and decodes the JSON answer.
func (c client) do(method, path string, body any) (int, map[string]any) {
	c.ta.t.Helper()
	var b []byte
	if body != nil {
		var err error
		if b, err = json.Marshal(body); err != nil {
			c.ta.t.Fatal(err)
		}
	}
	status, _, raw := c.raw(method, path, b)
	var out map[string]any
	if len(raw) > 0 {
		if err := json.Unmarshal(raw, &out); err != nil {
			c.ta.t.Errorf("%s %s: %d, not JSON: %q", method, path, status, raw)
		}
	}
	return status, out
}

// must sends a request and fails the test unless it answers want.
func (c client) must(want int, method, path string, body any) map[string]any {
	c.ta.t.Helper()
	status, out := c.do(method, path, body)
	if status != want {
		c.ta.t.Fatalf("%s %s: status %d, want %d: %v", method, path, status, want, out)
	}
	return out
}

// errorCode is the code of an error answer.
func errorCode(out map[string]any) string {
	e, _ := out["error"].(map[string]any)
	code, _ := e["code"].(string)
	return code
}

// account is an account created through POST /v0/signup.
type account struct {
	handle       string
	human, agent client
	humanKey     string
	agentKey     string
}

// signup creates an account with handle@example.com.
func (ta *hostedApp) signup(handle string) account {
	ta.t.Helper()
	out := ta.anonymous().must(http.StatusCreated, "POST", "/v0/signup", map[string]any{
		"handle": handle, "email": handle + "@example.com",
	})
	hk, _ := out["human_key"].(string)
	ak, _ := out["agent_key"].(string)
	if hk == "" || ak == "" {
		ta.t.Fatalf("signup %s: no keys in %v", handle, out)
	}
	return account{handle: handle, human: ta.as(hk), agent: ta.as(ak), humanKey: hk, agentKey: ak}
}

// createMandate creates a root mandate for an account through the API.
func (a account) createMandate(name string, doc map[string]any) map[string]any {
	a.human.ta.t.Helper()
	body := map[string]any{"id": name, "grantee": a.handle + "/assistant"}
	for k, v := range doc {
		body[k] = v
	}
	return a.human.must(http.StatusCreated, "POST", "/v0/mandates", body)
}

// newAgentKey creates an agent key bound to one of the account's mandates.
func (a account) newAgentKey(mandate string) (client, string) {
	a.human.ta.t.Helper()
	out := a.human.must(http.StatusCreated, "POST", "/v0/keys", map[string]any{"mandate": mandate})
	key, _ := out["key"].(string)
	prefix, _ := out["prefix"].(string)
	if key == "" || prefix == "" {
		a.human.ta.t.Fatalf("no key in %v", out)
	}
	return a.human.ta.as(key), prefix
}

// lookup is a call to holon-labs/company-lookup (0.08 EUR, per run).
func lookup(mandate string) map[string]any {
	b := map[string]any{"agent": "holon-labs/company-lookup", "input": map[string]any{"name": "Globex GmbH"}}
	if mandate != "" {
		b["mandate"] = mandate
	}
	return b
}

// balance is an account's balance as its human key sees it.
func (a account) balance() string {
	a.human.ta.t.Helper()
	out := a.human.must(http.StatusOK, "GET", "/v0/me", nil)
	bal, _ := out["balance"].(map[string]any)
	s, _ := bal["balance"].(string)
	return s
}

// receiptCount counts the receipts of a mandate through the API.
func (c client) receiptCount(mandate string) int {
	c.ta.t.Helper()
	out := c.must(http.StatusOK, "GET", "/v0/receipts?limit=500&mandate="+mandate, nil)
	rs, _ := out["receipts"].([]any)
	return len(rs)
}

func str(v any) string { return fmt.Sprint(v) }

func containsAny(s string, subs ...string) bool {
	for _, x := range subs {
		if x != "" && strings.Contains(s, x) {
			return true
		}
	}
	return false
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func jsonUnmarshal(b []byte, v any) error { return json.Unmarshal(b, v) }
