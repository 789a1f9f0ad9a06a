package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	dto "github.com/prometheus/client_model/go"

	"holon.dev/holon/gateway"
)

// TestMain lets a test run this test binary as the holon program itself:
// with HOLON_TEST_CHILD=serve it runs `holon serve` the way main does
// (signals, exit code), with the arguments in HOLON_TEST_CHILD_ARGS (a JSON
// list) and the slow test agent compiled in, as the shipped agents are.
func TestMain(m *testing.M) {
	if os.Getenv("HOLON_TEST_CHILD") == "serve" {
		var args []string
		if err := json.Unmarshal([]byte(os.Getenv("HOLON_TEST_CHILD_ARGS")), &args); err != nil {
			fmt.Fprintln(os.Stderr, "HOLON_TEST_CHILD_ARGS:", err)
			os.Exit(2)
		}
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		defer stop()
		c := &serveCommand{stderr: os.Stderr, getenv: os.Getenv, devHandlers: testAgents(), onStep: crashAt(os.Getenv("HOLON_TEST_CRASH_AT"))}
		if err := c.Run(ctx, args); err != nil {
			fmt.Fprintf(os.Stderr, "holon serve: %v\n", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// slowManifest is a dev agent that sleeps for the milliseconds it is told,
// then gives back the word it was given. It costs 0.01 a run, so that each
// running call holds money.
const slowManifest = `id: ops-test/slow
version: 1.0.0
summary: Sleeps for the milliseconds it is told, then gives back the word it was given.
license: MIT
source: { repository: "https://github.com/ops-test/slow", commit: "0123456789abcdef0123456789abcdef01234567" }
capabilities: [test.sleep]
interface:
  input:
    type: object
    required: [ms, word]
    additionalProperties: false
    properties:
      ms: { type: integer, minimum: 0, maximum: 120000 }
      word: { type: string, maxLength: 100 }
  output:
    type: object
    required: [word]
    properties:
      word: { type: string }
pricing: { model: per_run, amount: "0.01", currency: EUR }
runtime: { kind: dev, limits: { timeout_s: 150 } }
data: { retention: none, regions: [eu], training: false }
`

// opsMandate lets ops/assistant call the test agents.
const opsMandate = `id: ops/test
issuer: ops
grantee: ops/assistant
currency: EUR
budget: { total: "50.00", per_call: "1.00" }
approval: { above: "1.00" }
allow:
  agents: ["ops-test/*", "holon-labs/*"]
  capabilities: ["*"]
`

// testAgents are the handlers of the test agents (runtime.tool defaults to
// the agent's name).
func testAgents() map[string]gateway.DevHandler {
	return map[string]gateway.DevHandler{
		"slow": func(ctx context.Context, input json.RawMessage, c *gateway.Ctx) (any, error) {
			var in struct {
				MS   int    `json:"ms"`
				Word string `json:"word"`
			}
			if err := json.Unmarshal(input, &in); err != nil {
				return nil, err
			}
			select {
			case <-time.After(time.Duration(in.MS) * time.Millisecond):
			case <-ctx.Done():
				return nil, ctx.Err()
			}
			return map[string]string{"word": in.Word}, nil
		},
	}
}

// opsDirs writes a registry directory with the slow agent and a mandates
// directory with ops/test.
func opsDirs(t *testing.T) (registry, mandates string) {
	t.Helper()
	registry, mandates = t.TempDir(), t.TempDir()
	if err := os.MkdirAll(filepath.Join(registry, "slow"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(registry, "slow", "holon.yaml"), []byte(slowManifest), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(mandates, "ops-test.yaml"), []byte(opsMandate), 0o644); err != nil {
		t.Fatal(err)
	}
	return registry, mandates
}

// lockedBuffer is a log sink that goroutines may write to after a test.
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

// runningServe is holon serve run in this process until the test ends.
type runningServe struct {
	addrs  map[string]string
	stderr *lockedBuffer
	cancel context.CancelFunc
	done   chan error
	once   sync.Once
}

// startServe runs holon serve in-process with the test agents and waits
// until every listener serves.
func startServe(t *testing.T, env map[string]string, args ...string) *runningServe {
	t.Helper()
	return startServeOn(t, nil, env, args...)
}

// startServeOn is startServe whose listeners for the addresses of held are
// the ones held (bound once by the test), not new ones.
func startServeOn(t *testing.T, held map[string]*heldPort, env map[string]string, args ...string) *runningServe {
	t.Helper()
	rs := &runningServe{addrs: map[string]string{}, stderr: &lockedBuffer{}, done: make(chan error, 1)}
	var mu sync.Mutex
	ready := make(chan struct{})
	c := &serveCommand{
		stderr: rs.stderr, getenv: func(k string) string { return env[k] }, devHandlers: testAgents(),
		listening: func(name, addr string) { mu.Lock(); rs.addrs[name] = addr; mu.Unlock() },
		ready:     func(string) { close(ready) },
	}
	if held != nil {
		c.listenOn = func(addr string) (net.Listener, error) {
			if h, ok := held[addr]; ok {
				return h.listener()
			}
			return net.Listen("tcp", addr)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	rs.cancel = cancel
	go func() { rs.done <- c.Run(ctx, args) }()
	select {
	case <-ready:
	case err := <-rs.done:
		t.Fatalf("serve stopped: %v\n%s", err, rs.stderr.String())
	case <-time.After(30 * time.Second):
		t.Fatalf("serve did not start\n%s", rs.stderr.String())
	}
	t.Cleanup(func() { rs.stop(t) })
	return rs
}

// stop cancels serve (as SIGTERM does) and waits for it, once.
func (rs *runningServe) stop(t *testing.T) {
	t.Helper()
	rs.once.Do(func() {
		rs.cancel()
		select {
		case err := <-rs.done:
			if err != nil {
				t.Errorf("serve: %v\n%s", err, rs.stderr.String())
			}
		case <-time.After(30 * time.Second):
			t.Error("serve did not stop")
		}
	})
}

// do sends a JSON request and decodes a JSON answer into out (if given).
func do(t *testing.T, c *http.Client, method, url, key string, body any, out any) int {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("%s %s: %d %s: %v", method, url, resp.StatusCode, b, err)
		}
	}
	return resp.StatusCode
}

// scrape fetches a /metrics URL and parses it with Prometheus's text
// parser.
func scrape(t *testing.T, url, key string) map[string]*dto.MetricFamily {
	t.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d", url, resp.StatusCode)
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/plain") {
		t.Errorf("GET %s: Content-Type %q, want the text format", url, ct)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("parse %s: %v", url, err)
	}
	return fams
}

// metricValue is the value of the sample of family name whose labels
// include want: a counter's or gauge's value, a histogram's count. ok is
// false when there is no such sample.
func metricValue(fams map[string]*dto.MetricFamily, name string, want map[string]string) (v float64, ok bool) {
	f := fams[name]
	if f == nil {
		return 0, false
	}
next:
	for _, m := range f.GetMetric() {
		labels := map[string]string{}
		for _, l := range m.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		for k, w := range want {
			if labels[k] != w {
				continue next
			}
		}
		switch {
		case m.Counter != nil:
			return m.GetCounter().GetValue(), true
		case m.Gauge != nil:
			return m.GetGauge().GetValue(), true
		case m.Histogram != nil:
			return float64(m.GetHistogram().GetSampleCount()), true
		case m.Untyped != nil:
			return m.GetUntyped().GetValue(), true
		}
	}
	return 0, false
}

// histogramSum is the sum of the histogram sample of name with labels.
func histogramSum(fams map[string]*dto.MetricFamily, name string, want map[string]string) float64 {
	f := fams[name]
	if f == nil {
		return 0
	}
next:
	for _, m := range f.GetMetric() {
		for _, l := range m.GetLabel() {
			if w, ok := want[l.GetName()]; ok && w != l.GetValue() {
				continue next
			}
		}
		if h := m.GetHistogram(); h != nil {
			return h.GetSampleSum()
		}
	}
	return 0
}

// heldPort is a loopback port a test bound once and keeps for its whole
// run: each server started on it gets a listener of its own on the same
// socket (closing that one leaves the port held), so no other process can
// take the port between the test's choice and the server's start.
type heldPort struct {
	f    *os.File
	addr string
	port int
}

func holdPort(t *testing.T) *heldPort {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f, err := ln.(*net.TCPListener).File()
	ln.Close()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	a := ln.Addr().(*net.TCPAddr)
	return &heldPort{f: f, addr: a.String(), port: a.Port}
}

// listener is a new listener on the held socket.
func (h *heldPort) listener() (net.Listener, error) { return net.FileListener(h.f) }
