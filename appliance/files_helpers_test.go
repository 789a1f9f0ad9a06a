package appliance_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"holon.dev/holon/appliance"
	"holon.dev/holon/gateway"
	"holon.dev/holon/gateway/remote"
)

// testFileSecret is HOLON_FILE_SECRET in the files tests.
const testFileSecret = "fs-7Hq2Lx9Vb4Nc8Zr1Tk5Mw3Jd6Gp0Yse"

// filesRegistry adds two orchestrators, test-lab/outer (which hands its
// input to test-lab/inner) and test-lab/inner (which hands it to
// holon-labs/text-tables): a file handle two levels of delegation down.
// (test-lab/outer also declares text-tables: a sub-mandate never allows
// more than its parent's.)
var filesRegistry = map[string]string{
	"outer.yaml": forwarderManifest("outer", "test-lab/inner@^1", "0.20", "\n  - { agent: \"holon-labs/text-tables@^1\", max_cost: \"0.05\" }"),
	"inner.yaml": forwarderManifest("inner", "holon-labs/text-tables@^1", "0.05", ""),
}

func forwarderManifest(name, target, maxCost, moreCalls string) string {
	return `
id: test-lab/` + name + `
version: 1.0.0
summary: Hands its input to ` + target + ` and answers with its output.
license: Apache-2.0
source: { repository: "https://github.com/test-lab/agents", commit: "0000000000000000000000000000000000000000" }
interface:
  input: { type: object }
  output: { type: object }
  errors:
    downstream_failed: { billed: false, description: The downstream call failed. }
pricing: { model: per_run, amount: "0.01", currency: EUR }
runtime: { kind: dev, tool: ` + name + ` }
calls:
  - agent: "` + target + `"
    max_cost: "` + maxCost + `"` + moreCalls + `
downstream: { mode: passthrough, cap: "` + maxCost + `" }
data: { retention: none, regions: [eu], training: false }
`
}

// forward is the handler of a forwarder: it passes its input on
// unchanged; or, with handles, an input {ref: <id>} becomes {file:
// holon://files/<id>}, so that a handle first appears deep in the tree,
// written by an agent and not by the caller.
func forward(target string, handles bool) gateway.DevHandler {
	return func(ctx context.Context, input json.RawMessage, c *gateway.Ctx) (any, error) {
		var in struct {
			Ref string `json:"ref"`
		}
		if json.Unmarshal(input, &in) == nil && in.Ref != "" && handles {
			input, _ = json.Marshal(map[string]string{"file": gateway.FileHandlePrefix + in.Ref})
		}
		out := c.Call(ctx, gateway.Target{Agent: target}, input)
		if !out.OK {
			return nil, c.Error("downstream_failed", out.Error+": "+out.Message)
		}
		return out.Output, nil
	}
}

// filesApp is a hosted gateway with a driven clock, a file secret, and a
// public origin (front) that serves the same handler, so that signed links
// point at a live server.
type filesApp struct {
	*hostedApp
	clock *fixedClock
	front *httptest.Server
}

func newFilesApp(t *testing.T, opts ...func(*appliance.Config)) *filesApp {
	t.Helper()
	front := httptest.NewUnstartedServer(nil)
	fa := &filesApp{clock: &fixedClock{now: time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)}, front: front}
	base := func(c *appliance.Config) {
		c.PublicURL = "http://" + front.Listener.Addr().String()
		c.FileSecret = testFileSecret
		c.Now = fa.clock.Now
		c.Registry = append(c.Registry, writeRegistry(t, filesRegistry))
		c.DevHandlers["outer"] = forward("test-lab/inner@^1", false)
		c.DevHandlers["inner"] = forward("holon-labs/text-tables@^1", true)
	}
	fa.hostedApp = newHostedApp(t, append([]func(*appliance.Config){base}, opts...)...)
	front.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fa.app.Handler().ServeHTTP(w, r) })
	front.Start()
	t.Cleanup(front.Close)
	return fa
}

// advance moves the gateway's clock.
func (fa *filesApp) advance(d time.Duration) {
	fa.clock.mu.Lock()
	fa.clock.now = fa.clock.now.Add(d)
	fa.clock.mu.Unlock()
}

// filesMandate gives an account <handle>/files: the test and shipped
// agents, 5.00 in all, 1.00 per call, no approval below 1.00.
func filesMandate(a account) string {
	a.createMandate("files", map[string]any{
		"budget":   map[string]any{"total": "5.00", "per_call": "1.00"},
		"approval": map[string]any{"above": "1.00"},
		"allow":    map[string]any{"agents": []string{"test-lab/*", "holon-labs/*"}},
	})
	return a.handle + "/files"
}

// upload posts a file and decodes the answer.
func (c client) upload(contentType string, body []byte) (int, map[string]any) {
	c.ta.t.Helper()
	if contentType != "" {
		c = c.with("Content-Type", contentType)
	}
	status, _, raw := c.raw("POST", "/v0/files", body)
	var out map[string]any
	if err := json.Unmarshal(raw, &out); err != nil {
		c.ta.t.Fatalf("POST /v0/files: %d, not JSON: %q", status, raw)
	}
	return status, out
}

// mustUpload uploads a file and returns its handle.
func (c client) mustUpload(contentType string, body []byte) string {
	c.ta.t.Helper()
	status, out := c.upload(contentType, body)
	if status != http.StatusCreated {
		c.ta.t.Fatalf("upload: %d %v", status, out)
	}
	return str(out["file"])
}

// callWith calls an agent under a mandate with input, and returns the
// status and the answer.
func (c client) callWith(mandate, agent string, input map[string]any) (int, map[string]any) {
	c.ta.t.Helper()
	return c.do("POST", "/v0/calls", map[string]any{"mandate": mandate, "agent": agent, "input": input})
}

// receiptOf is the receipt of a call's answer.
func receiptOf(out map[string]any) map[string]any {
	r, _ := out["receipt"].(map[string]any)
	return r
}

// blobs lists the stored file bytes under a files directory, leaving out
// those of the shipped evaluation fixtures (catalog/evals/*/files/), which every
// gateway stores as platform files at start-up.
func blobs(t *testing.T, dir string) []string {
	t.Helper()
	fixtures := map[string]bool{}
	err := filepath.WalkDir("catalog/evals", func(path string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.Contains(filepath.ToSlash(path), "/files/") {
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			fixtures[sha256Hex(b)] = true
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	err = filepath.WalkDir(filepath.Join(dir, "blobs"), func(path string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && !fixtures[d.Name()] {
			out = append(out, d.Name())
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func sha256Hex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// hookRecorder is a webhook agent on loopback that records the file links
// it is sent (x-holon-files) and answers {"ok": true}.
type hookRecorder struct {
	srv   *httptest.Server
	mu    sync.Mutex
	links []map[string]gateway.FileLink
}

func newHookRecorder(t *testing.T) *hookRecorder {
	h := &hookRecorder{}
	h.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var l map[string]gateway.FileLink
		if err := json.Unmarshal([]byte(r.Header.Get(remote.WebhookFilesHeader)), &l); err != nil {
			t.Errorf("%s: %v", remote.WebhookFilesHeader, err)
		}
		h.mu.Lock()
		h.links = append(h.links, l)
		h.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"ok": true}`))
	}))
	t.Cleanup(h.srv.Close)
	return h
}

func (h *hookRecorder) last() map[string]gateway.FileLink {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.links) == 0 {
		return nil
	}
	return h.links[len(h.links)-1]
}

// withRemote lists test-lab/<name>, a remote agent (any object in, any
// object out, 0.01 EUR a run) with the runtime given, on loopback.
func withRemote(t *testing.T, name, summary, runtime string) func(*appliance.Config) {
	return func(c *appliance.Config) {
		c.AllowPrivateEndpoints = true
		c.Registry = append(c.Registry, writeRegistry(t, map[string]string{name + ".yaml": `
id: test-lab/` + name + `
version: 1.0.0
summary: ` + summary + `
license: Apache-2.0
source: { repository: "https://github.com/test-lab/agents", commit: "0000000000000000000000000000000000000000" }
interface:
  input: { type: object }
  output: { type: object }
pricing: { model: per_run, amount: "0.01", currency: EUR }
runtime: ` + runtime + `
data: { retention: none, regions: [eu], training: false }
`}))
	}
}

// withHook lists test-lab/hook, a webhook agent at h.
func withHook(t *testing.T, h *hookRecorder) func(*appliance.Config) {
	return withRemote(t, "hook", "Records the links it is sent.", `{ kind: webhook, endpoint: "`+h.srv.URL+`" }`)
}
