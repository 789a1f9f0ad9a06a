package drill

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// agentServer serves the drill's webhook agents on loopback, one path
// each, and counts what they are asked to execute: by the gateway's request
// id (x-holon-call, the receipt) and by the nonce the drill put in the
// input, so that a call run twice is seen on the agent's side.
type agentServer struct {
	srv    *http.Server
	url    string
	client *http.Client

	mu      sync.Mutex
	byCall  map[string]int
	byNonce map[string]int
	// callOf is the receipt each nonce last ran under.
	callOf map[string]string
	runs   int64
	// handlers are the agents, by name (the path after /).
	handlers map[string]http.HandlerFunc
}

// agentInput is what the drill's agents are sent.
type agentInput struct {
	// N is the drill's nonce for the call: unique per logical call.
	N string `json:"n,omitempty"`
	// MS is how long a slow agent takes.
	MS int `json:"ms,omitempty"`
	// File is the handle of the file the reader agent reads.
	File string `json:"file,omitempty"`
	// Name is what the local agent (a dev runtime) looks up.
	Name string `json:"name,omitempty"`
}

func startAgents() (*agentServer, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	a := &agentServer{url: "http://" + ln.Addr().String(), byCall: map[string]int{}, byNonce: map[string]int{}, callOf: map[string]string{},
		handlers: map[string]http.HandlerFunc{}, client: &http.Client{Timeout: 30 * time.Second}}
	a.srv = &http.Server{Handler: http.HandlerFunc(a.serve), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = a.srv.Serve(ln) }()
	return a, nil
}

func (a *agentServer) close() { _ = a.srv.Close() }

// startStandardAgents starts the drills' agent server and writes a
// registry of its standard agents under the drill's directory; it returns
// the server (close it) and the registry's path.
func (d *drill) startStandardAgents() (*agentServer, string, error) {
	agents, err := startAgents()
	if err != nil {
		return nil, "", err
	}
	registry := filepath.Join(d.dir, "registry")
	if err := agents.writeRegistry(registry, agents.standardAgents()...); err != nil {
		agents.close()
		return nil, "", err
	}
	return agents, registry, nil
}

func (a *agentServer) serve(w http.ResponseWriter, r *http.Request) {
	name := strings.TrimPrefix(r.URL.Path, "/")
	h := a.handlers[name]
	if h == nil {
		http.NotFound(w, r)
		return
	}
	h(w, r)
}

// executed records one execution and returns the input it was sent.
func (a *agentServer) executed(r *http.Request) (agentInput, []byte) {
	body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	var in agentInput
	_ = json.Unmarshal(body, &in)
	a.mu.Lock()
	a.runs++
	a.byCall[r.Header.Get("x-holon-call")]++
	if in.N != "" {
		a.byNonce[in.N]++
		a.callOf[in.N] = r.Header.Get("x-holon-call")
	}
	a.mu.Unlock()
	return in, body
}

// reset forgets the counts (the drill moved to another store, whose
// receipt ids start again).
func (a *agentServer) reset() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.byCall, a.byNonce, a.callOf = map[string]int{}, map[string]int{}, map[string]string{}
}

// ranAs returns the receipt the nonce ran under ("" if it never ran).
func (a *agentServer) ranAs(nonce string) string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.callOf[nonce]
}

// counts returns copies of the execution counts.
func (a *agentServer) counts() (byCall, byNonce map[string]int, runs int64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	byCall, byNonce = make(map[string]int, len(a.byCall)), make(map[string]int, len(a.byNonce))
	for k, v := range a.byCall {
		byCall[k] = v
	}
	for k, v := range a.byNonce {
		byNonce[k] = v
	}
	return byCall, byNonce, a.runs
}

// echo answers {"n": …} at once.
func (a *agentServer) echo(w http.ResponseWriter, r *http.Request) {
	in, _ := a.executed(r)
	writeAgentJSON(w, map[string]any{"n": in.N})
}

// slow answers after the milliseconds it was told.
func (a *agentServer) slow(w http.ResponseWriter, r *http.Request) {
	in, _ := a.executed(r)
	select {
	case <-time.After(time.Duration(in.MS) * time.Millisecond):
	case <-r.Context().Done():
		return
	}
	writeAgentJSON(w, map[string]any{"n": in.N})
}

// orchestrate delegates one call to drill/echo through the grant it was
// given (x-holon-delegation), then answers with the child's status.
func (a *agentServer) orchestrate(w http.ResponseWriter, r *http.Request) {
	in, _ := a.executed(r)
	var grant struct {
		URL   string `json:"url"`
		Token string `json:"token"`
	}
	if err := json.Unmarshal([]byte(r.Header.Get("x-holon-delegation")), &grant); err != nil {
		w.WriteHeader(http.StatusBadRequest)
		fmt.Fprintf(w, `{"error":{"code":"no_grant","message":%q}}`, err.Error())
		return
	}
	body, _ := json.Marshal(map[string]any{"agent": "drill/echo", "input": map[string]any{"n": in.N + ".child"}})
	req, _ := http.NewRequestWithContext(r.Context(), http.MethodPost, grant.URL, bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+grant.Token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := a.client.Do(req)
	if err != nil {
		w.WriteHeader(http.StatusBadGateway)
		fmt.Fprintf(w, `{"error":{"code":"child_failed","message":%q}}`, err.Error())
		return
	}
	defer resp.Body.Close()
	var ans struct {
		Receipt struct {
			Status string `json:"status"`
		} `json:"receipt"`
	}
	_ = json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&ans)
	writeAgentJSON(w, map[string]any{"n": in.N, "child": ans.Receipt.Status})
}

func writeAgentJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

// agentSpec is one webhook agent of the drill's registry.
type agentSpec struct {
	name    string // drill/<name>, served at /<name>
	price   string // per_run, EUR
	timeout int    // runtime.limits.timeout_s
	extra   string // more manifest YAML (calls, downstream, errors)
	input   string // the input schema, as YAML flow (default: {n, ms})
	handler http.HandlerFunc
}

// writeRegistry writes a holon.yaml for each agent under dir and serves
// their handlers.
func (a *agentServer) writeRegistry(dir string, specs ...agentSpec) error {
	for _, s := range specs {
		a.handlers[s.name] = s.handler
		input := s.input
		if input == "" {
			// pad: the faults drill's large inputs, kept by the store
			// while their approvals are pending (faults.go, growStore).
			input = "{type: object, additionalProperties: false, properties: {n: {type: string, maxLength: 200}, ms: {type: integer, minimum: 0, maximum: 60000}, pad: {type: string, maxLength: 2000000}}}"
		}
		doc := fmt.Sprintf(`id: drill/%s
version: 1.0.0
summary: A webhook agent of the drills, on loopback.
license: proprietary
interface:
  input: %s
  output: {type: object}
  errors:
    quota: {billed: true, description: Out of quota.}
pricing: {model: per_run, amount: %q, currency: EUR}
runtime: {kind: webhook, endpoint: %q, limits: {timeout_s: %d}}
%s`, s.name, input, s.price, a.url+"/"+s.name, s.timeout, s.extra)
		if err := writeManifest(dir, s.name, doc); err != nil {
			return err
		}
	}
	return nil
}

// writeManifest writes dir/name/holon.yaml.
func writeManifest(dir, name, doc string) error {
	if err := os.MkdirAll(filepath.Join(dir, name), 0o755); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, name, "holon.yaml"), []byte(doc), 0o644)
}

// standardAgents are the well-behaved agents every drill's load uses:
// echo (0.01), slow (0.02), pricey (0.60, above the approval threshold) and
// orch (0.05, delegates one call to echo, passthrough).
func (a *agentServer) standardAgents() []agentSpec {
	return []agentSpec{
		{name: "echo", price: "0.01", timeout: 10, handler: a.echo},
		{name: "slow", price: "0.02", timeout: 30, handler: a.slow},
		{name: "pricey", price: "0.60", timeout: 10, handler: a.echo},
		{name: "orch", price: "0.05", timeout: 30, handler: a.orchestrate, extra: `calls:
  - {agent: drill/echo, max_cost: "0.02"}
downstream: {mode: passthrough, cap: "0.05"}
`},
	}
}
