package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"holon.dev/holon"
	"holon.dev/holon/gateway"
	"holon.dev/holon/gateway/storetest"
	"holon.dev/holon/kv"
)

// crashAt is holon serve's fault-injection hook in its test child role
// (HOLON_TEST_CRASH_AT=<step>): the process SIGKILLs itself when a call
// reaches that step of its lifecycle. Nil when no step is named.
func crashAt(step string) func(step, receipt string) {
	if step == "" {
		return nil
	}
	return func(s, _ string) {
		if s == step {
			_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
			select {} // the signal is on its way
		}
	}
}

// remoteManifest is the slow agent's interface and price served by a
// remote agent (runtime, such as "{kind: webhook, endpoint: …}") that
// gives back the word it was given.
func remoteManifest(name, runtime string) string {
	m := strings.Replace(slowManifest, "id: ops-test/slow", "id: ops-test/"+name, 1)
	m = strings.Replace(m, "capabilities: [test.sleep]", "capabilities: [test."+name+"]", 1)
	return strings.Replace(m, "runtime: { kind: dev, limits: { timeout_s: 150 } }", "runtime: "+runtime, 1)
}

// Outcomes of a call cut by a crash, as the restarted gateway shows it.
const (
	outcomeNone    = "none"    // no receipt: the call left no trace
	outcomeCut     = "cut"     // failed, gateway_restarted, not billed
	outcomeSettled = "settled" // succeeded and billed, its settlement journaled
)

// stepAgentReceived is not a step of the gateway's: the remote agent kills
// the gateway when the request reaches it (between "request sent" and
// "answer received"). stepAnswered: the test kills it once answered.
const (
	stepAgentReceived = "agent-received"
	stepAnswered      = "answered"
)

// crashCase is one kill: where, and what the restarted gateway may show.
type crashCase struct {
	step    string
	allowed []string
}

// Ensure that the durability rule holds wherever the process dies: holon
// serve is SIGKILLed between every pair of steps of a call's lifecycle, for
// an in-process (dev) agent and remote ones (webhook, MCP), with and without an
// Idempotency-Key; after a restart on the same store, holon verify passes,
// no hold is left, a call answered 200 has its billed receipt and one
// settle: entry, a call cut short is failed gateway_restarted and unbilled
// (or, for an in-process agent killed before its reservation committed,
// left no trace at all), the remote agent never received a request whose
// reservation was not durable, and the Idempotency-Key replays a settled
// call, answers 409 idempotency_interrupted for a call cut short, and runs
// a call that left no trace.
func TestServe_Crash_DurabilityRule(t *testing.T) {
	if testing.Short() {
		t.Skip("starts holon serve twice per case")
	}
	// A call to an in-process agent keeps its reservation in memory: the
	// store knows nothing of it before its settlement commits (there is no
	// reserve-durable step), and a kill before that leaves no trace.
	dev := []crashCase{
		{gateway.StepAdmitted, []string{outcomeNone}},
		{gateway.StepReserveApplied, []string{outcomeNone}},
		{gateway.StepRun, []string{outcomeNone}},
		{gateway.StepRunReturned, []string{outcomeNone}},
		{gateway.StepSettleApplied, []string{outcomeNone, outcomeSettled}},
		{gateway.StepSettleDurable, []string{outcomeSettled}},
		{stepAnswered, []string{outcomeSettled}},
	}
	remote := []crashCase{
		{gateway.StepAdmitted, []string{outcomeNone}},
		{gateway.StepReserveApplied, []string{outcomeNone, outcomeCut}},
		{gateway.StepReserveDurable, []string{outcomeCut}},
		{gateway.StepRun, []string{outcomeCut}},
		{stepAgentReceived, []string{outcomeCut}},
		{gateway.StepRunReturned, []string{outcomeCut}},
		{gateway.StepSettleApplied, []string{outcomeCut, outcomeSettled}},
		{gateway.StepSettleDurable, []string{outcomeSettled}},
		{stepAnswered, []string{outcomeSettled}},
	}
	for _, kind := range []struct {
		name, agent string
		idem        bool
		cases       []crashCase
	}{
		{"dev", "ops-test/slow", false, dev},
		{"dev-idempotent", "ops-test/slow", true, dev},
		{"webhook-idempotent", "ops-test/hook", true, remote},
		{"mcp", "ops-test/mcp", false, remote},
	} {
		for _, cc := range kind.cases {
			t.Run(kind.name+"/"+cc.step, func(t *testing.T) {
				t.Parallel()
				crashOnce(t, kind.agent, kind.idem, cc)
			})
		}
	}
}

// hookAgent is the remote agent, as a webhook (/hook) and as an MCP server
// (/mcp, tool echo): it records the receipt of every request it receives
// ("" over MCP, which does not carry it), and can kill the gateway when one
// arrives.
type hookAgent struct {
	url string

	mu       sync.Mutex
	received []string
	kill     func()
}

func startHookAgent(t *testing.T) *hookAgent {
	t.Helper()
	a := &hookAgent{}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/hook", func(w http.ResponseWriter, r *http.Request) {
		var in struct{ Word string }
		if err := json.NewDecoder(r.Body).Decode(&in); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		a.receive(r.Header.Get("x-holon-call"))
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]string{"word": in.Word})
	})
	type word struct {
		MS   int    `json:"ms"`
		Word string `json:"word"`
	}
	type out struct {
		Word string `json:"word"`
	}
	ms := mcp.NewServer(&mcp.Implementation{Name: "crash-agent", Version: "v0"}, nil)
	mcp.AddTool(ms, &mcp.Tool{Name: "echo", Description: "Gives back the word."},
		func(_ context.Context, _ *mcp.CallToolRequest, in word) (*mcp.CallToolResult, out, error) {
			a.receive("")
			return nil, out{Word: in.Word}, nil
		})
	mux.Handle("/mcp", mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return ms }, nil))
	srv := &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: mux}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { srv.Close() })
	a.url = "http://" + ln.Addr().String()
	return a
}

// receive records a request and, when asked to, kills the gateway.
func (a *hookAgent) receive(receipt string) {
	a.mu.Lock()
	a.received = append(a.received, receipt)
	kill := a.kill
	a.kill = nil
	a.mu.Unlock()
	if kill != nil {
		kill()
	}
}

func (a *hookAgent) receipts() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.received)
}

// callAnswer is what a POST /v0/calls answered (code 0: no answer, the
// process died).
type crashAnswer struct {
	code     int
	receipt  string
	replayed bool
	errCode  string
}

func postCall(api, agent, key string) crashAnswer {
	body := fmt.Sprintf(`{"mandate":"ops/test","agent":%q,"input":{"ms":0,"word":"w"}}`, agent)
	req, _ := http.NewRequest(http.MethodPost, api+"/v0/calls", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	resp, err := (&http.Client{Timeout: 20 * time.Second}).Do(req)
	if err != nil {
		return crashAnswer{}
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var out struct {
		Receipt  struct{ ID string }
		Replayed bool
		Error    struct{ Code string }
	}
	if json.Unmarshal(b, &out) != nil {
		return crashAnswer{}
	}
	return crashAnswer{code: resp.StatusCode, receipt: out.Receipt.ID, replayed: out.Replayed, errCode: out.Error.Code}
}

func crashOnce(t *testing.T, agent string, idem bool, cc crashCase) {
	registry, mandates := opsDirs(t)
	hook := startHookAgent(t)
	for name, runtime := range map[string]string{
		"hook": fmt.Sprintf("{ kind: webhook, endpoint: %q }", hook.url+"/hook"),
		"mcp":  fmt.Sprintf("{ kind: mcp, endpoint: %q, tool: echo }", hook.url+"/mcp"),
	} {
		if err := os.WriteFile(filepath.Join(registry, name+".yaml"), []byte(remoteManifest(name, runtime)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	db := filepath.Join(t.TempDir(), "holon.db")
	env := []string{"HOLON_REGISTRY=" + registry, "HOLON_ENV=development", "HOLON_ALLOW_PRIVATE_ENDPOINTS=1"}
	args := []string{"--addr", "127.0.0.1:0", "--db", db, "--mandates", mandates}
	key := ""
	if idem {
		key = "crash-" + cc.step
	}

	crashEnv := env
	switch cc.step {
	case stepAgentReceived, stepAnswered:
	default:
		crashEnv = append(slices.Clone(env), "HOLON_TEST_CRASH_AT="+cc.step)
	}
	first := startChild(t, crashEnv, args...)
	hook.mu.Lock()
	if cc.step == stepAgentReceived {
		hook.kill = func() { _ = first.cmd.Process.Kill() }
	}
	hook.mu.Unlock()
	ans := postCall("http://"+first.addr, agent, key)
	if cc.step == stepAnswered {
		if ans.code != http.StatusOK {
			t.Fatalf("the call answered %d before the kill, want 200", ans.code)
		}
		_ = first.cmd.Process.Kill()
	}
	select {
	case err := <-first.exited:
		if ws, ok := exitStatus(err); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
			t.Fatalf("holon serve exited with %v, want killed at %s\n%s", err, cc.step, first.stderr.String())
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("holon serve was not killed at %s", cc.step)
	}
	if ans.code != 0 && ans.code != http.StatusOK {
		t.Fatalf("the call answered %d %s", ans.code, ans.errCode)
	}
	sentBefore := hook.receipts()

	// Restart on the same store: calls left in flight are closed, keys
	// whose calls were cut short marked.
	second := startChild(t, env, args...)
	api := "http://" + second.addr
	receipts := listReceipts(t, api)
	outcome := outcomeNone
	var rid string
	switch len(receipts) {
	case 0:
	case 1:
		r := receipts[0]
		rid = r.ID
		switch {
		case r.Status == holon.StatusSucceeded && r.Billed:
			outcome = outcomeSettled
		case r.Status == holon.StatusFailed && r.Error != nil && *r.Error == holon.CodeGatewayRestarted && !r.Billed:
			outcome = outcomeCut
		default:
			t.Fatalf("after the restart the call's receipt is %s billed=%v error=%v", r.Status, r.Billed, r.Error)
		}
	default:
		t.Fatalf("%d receipts after the restart, want at most 1", len(receipts))
	}
	if !slices.Contains(cc.allowed, outcome) {
		t.Errorf("killed at %s: the call is %q after the restart, want one of %v", cc.step, outcome, cc.allowed)
	}
	if ans.code == http.StatusOK && (outcome != outcomeSettled || ans.receipt != rid) {
		t.Errorf("the call was answered 200 with %s, but after the restart it is %q (%s)", ans.receipt, outcome, rid)
	}
	for _, sent := range sentBefore {
		if sent != "" && sent != rid || outcome == outcomeNone {
			t.Errorf("the remote agent received a request for %s, which the restarted gateway does not know (receipt %q, %s)", sent, rid, outcome)
		}
	}
	if agent != "ops-test/slow" && slices.Index([]string{gateway.StepAdmitted, gateway.StepReserveApplied, gateway.StepReserveDurable, gateway.StepRun}, cc.step) >= 0 && len(sentBefore) > 0 {
		t.Errorf("killed at %s, yet the remote agent received %d request(s) %q", cc.step, len(sentBefore), sentBefore)
	}

	if idem {
		again := postCall(api, agent, key)
		switch outcome {
		case outcomeSettled:
			if again.code != http.StatusOK || !again.replayed || again.receipt != rid {
				t.Errorf("re-sent after the restart: %+v, want 200 replaying %s", again, rid)
			}
		case outcomeCut:
			if again.code != http.StatusConflict || again.errCode != "idempotency_interrupted" {
				t.Errorf("re-sent after the restart: %+v, want 409 idempotency_interrupted", again)
			}
		case outcomeNone:
			if again.code != http.StatusOK || again.replayed || again.receipt == "" {
				t.Errorf("re-sent after the restart: %+v, want the call to run (200)", again)
			}
		}
	}

	if err := second.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	second.wait(t, 20*time.Second)
	if code, out, errs := run(t, "verify", "--db", db); code != 0 {
		t.Errorf("holon verify after the restart: exit %d\n%s%s", code, out, errs)
	}
	checkSettled(t, db)
}

// exitStatus is the wait status of a process that exited.
func exitStatus(err error) (syscall.WaitStatus, bool) {
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		return 0, false
	}
	ws, ok := ee.Sys().(syscall.WaitStatus)
	return ws, ok
}

func listReceipts(t *testing.T, api string) []holon.Receipt {
	t.Helper()
	resp, err := http.Get(api + "/v0/receipts?mandate=ops/test")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var page struct{ Receipts []holon.Receipt }
	if resp.StatusCode != http.StatusOK || json.NewDecoder(bytes.NewReader(b)).Decode(&page) != nil {
		t.Fatalf("GET /v0/receipts: %d %s", resp.StatusCode, b)
	}
	return page.Receipts
}

// checkSettled opens the stopped gateway's store: its money checks
// (storetest.CheckMoney: no hold is left, every receipt agrees with the
// journal), and every billed receipt has exactly its one settle: entry.
func checkSettled(t *testing.T, db string) {
	t.Helper()
	s, err := kv.OpenReadOnly(db)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	storetest.CheckMoney(t, s.Holon())
	err = s.View(func(tx *kv.Tx) error {
		page, err := tx.Receipts("", "", 100)
		if err != nil {
			return err
		}
		for _, r := range page.Receipts {
			if has := tx.HasEntry("settle:" + r.ID); has != r.Billed {
				t.Errorf("receipt %s billed=%v, its settle: entry present=%v", r.ID, r.Billed, has)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
