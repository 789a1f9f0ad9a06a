package remote_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"holon.dev/holon/gateway/remote"
)

// hookRequest is one request a webhook server saw.
type hookRequest struct {
	Method, Path string
	Header       http.Header
	Body         string
}

// hookServer is a real HTTP server on loopback answering as a webhook agent
// does, one behaviour per path, recording every request.
type hookServer struct {
	*httptest.Server
	mu   sync.Mutex
	reqs []hookRequest
}

func newHookServer(t *testing.T, redirectTo string) *hookServer {
	t.Helper()
	h := &hookServer{}
	mux := http.NewServeMux()
	answer := func(status int, body string) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(status)
			io.WriteString(w, body)
		}
	}
	mux.HandleFunc("/echo", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, h.last().Body)
	})
	mux.HandleFunc("/created", answer(http.StatusCreated, `{"made":true}`))
	mux.HandleFunc("/quota", answer(http.StatusTooManyRequests, `{"error":{"code":"quota","message":"out of quota"}}`))
	mux.HandleFunc("/bad-doc-200", answer(http.StatusOK, `{"error":{"code":"bad_doc","message":"cannot read it"}}`))
	mux.HandleFunc("/unknown-code", answer(http.StatusBadRequest, `{"error":{"code":"weird","message":"?"}}`))
	mux.HandleFunc("/error-string", answer(http.StatusBadRequest, `{"error":"nope"}`))
	mux.HandleFunc("/status-500", answer(http.StatusInternalServerError, `{"oops":true}`))
	mux.HandleFunc("/not-json", answer(http.StatusOK, `hello`))
	mux.HandleFunc("/empty", answer(http.StatusOK, ``))
	mux.HandleFunc("/array", answer(http.StatusOK, `[1,2]`))
	mux.HandleFunc("/redirect", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, redirectTo, http.StatusTemporaryRedirect)
	})
	mux.HandleFunc("/hang", func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-time.After(10 * time.Second):
		}
	})
	h.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		h.mu.Lock()
		h.reqs = append(h.reqs, hookRequest{Method: r.Method, Path: r.URL.Path, Header: r.Header.Clone(), Body: string(b)})
		h.mu.Unlock()
		mux.ServeHTTP(w, r)
	}))
	t.Cleanup(h.Close)
	return h
}

func (h *hookServer) requests() []hookRequest {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]hookRequest(nil), h.reqs...)
}

func (h *hookServer) last() hookRequest {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.reqs[len(h.reqs)-1]
}

// Ensure that every row of the webhook contract is followed, billed exactly
// as declared: the input is POSTed as the body with x-holon-agent and
// x-holon-call, a 2xx JSON answer is the output, {"error": {code, message}}
// at any status is billed as declared (unknown codes never), and anything
// else is agent_error, never billed.
func TestWebhookRunner_Contract(t *testing.T) {
	var elsewhere atomic.Int64
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		elsewhere.Add(1)
		io.WriteString(w, `{"followed":true}`)
	}))
	defer other.Close()
	hook := newHookServer(t, other.URL+"/target")
	perRun := `{model: per_run, amount: "0.10", currency: EUR}`
	attempt := `{model: per_run, amount: "0.10", currency: EUR, charge_on: attempt}`
	paths := []string{"echo", "created", "quota", "bad-doc-200", "unknown-code", "error-string", "status-500", "not-json", "empty", "array", "redirect", "hang"}
	var manifests []string
	for _, p := range paths {
		manifests = append(manifests, webhookManifest(p, hook.URL+"/"+p, attempt, ""))
	}
	manifests[len(manifests)-1] = webhookManifestT("hang", hook.URL+"/hang", attempt, 1, "")
	manifests = append(manifests, webhookManifest("quota-s", hook.URL+"/quota", perRun, ""))
	g := openRemote(t, rmConfig{manifests: manifests})
	for _, tt := range []struct {
		name, agent, input string
		want               billing
		output, message    string
	}{
		{"2xx JSON is the output", "echo", `{"text":"hi","n":[1,2]}`, billing{"succeeded", "", true, "0.10"}, `{"text":"hi","n":[1,2]}`, ""},
		{"any 2xx", "created", `{}`, billing{"succeeded", "", true, "0.10"}, `{"made":true}`, ""},
		{"declared, billed, charge_on attempt, at 429", "quota", `{}`, billing{"failed", "quota", true, "0.10"}, "", "out of quota"},
		{"declared billed, charge_on success", "quota-s", `{}`, billing{"failed", "quota", false, "0.00"}, "", "out of quota"},
		{"declared, not billed, at 200", "bad-doc-200", `{}`, billing{"failed", "bad_doc", false, "0.00"}, "", "cannot read it"},
		{"an unknown code is never billed", "unknown-code", `{}`, billing{"failed", "agent_error", false, "0.00"}, "", ""},
		{"an error that is not an object", "error-string", `{}`, billing{"failed", "agent_error", false, "0.00"}, "", "400"},
		{"a non-2xx status", "status-500", `{}`, billing{"failed", "agent_error", false, "0.00"}, "", "500"},
		{"a body that is not JSON", "not-json", `{}`, billing{"failed", "agent_error", false, "0.00"}, "", "not JSON"},
		{"an empty body", "empty", `{}`, billing{"failed", "agent_error", false, "0.00"}, "", "not JSON"},
		{"JSON off interface.output", "array", `{}`, billing{"failed", "invalid_output", false, "0.00"}, "", ""},
		{"a redirect is not followed", "redirect", `{}`, billing{"failed", "agent_error", false, "0.00"}, "", "not followed"},
		{"the hard timeout", "hang", `{}`, billing{"failed", "timeout", false, "0.00"}, "", ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			before := g.balance(t, "tess")
			n := len(hook.requests())
			res := g.call(t, "acme/"+tt.agent, tt.input, "")
			if got := billingOf(res.Receipt); got != tt.want {
				t.Fatalf("receipt %v (%s), want %v", got, res.Message, tt.want)
			}
			if spent := before - g.balance(t, "tess"); spent != res.Receipt.Cost.Own {
				t.Errorf("tess paid %s, the receipt says %s", spent, res.Receipt.Cost.Own)
			}
			if tt.output != "" && !jsonEq(t, res.Output, tt.output) {
				t.Errorf("output %s, want %s", res.Output, tt.output)
			}
			if tt.message != "" && !strings.Contains(res.Message, tt.message) {
				t.Errorf("message %q, want it to say %q", res.Message, tt.message)
			}
			reqs := hook.requests()
			if len(reqs) != n+1 {
				t.Fatalf("the server saw %d requests, want 1", len(reqs)-n)
			}
			r := reqs[n]
			ref := "acme/" + tt.agent + "@1.0.0"
			if r.Method != http.MethodPost || r.Body != tt.input {
				t.Errorf("%s with body %s, want POST with the input %s", r.Method, r.Body, tt.input)
			}
			for h, want := range map[string]string{
				"X-Holon-Agent": ref, "X-Holon-Call": res.Receipt.ID, "Content-Type": "application/json",
				"Authorization": "", "X-Holon-Delegation": "",
			} {
				if got := r.Header.Get(h); got != want {
					t.Errorf("%s: %q, want %q", h, got, want)
				}
			}
		})
	}
	if n := elsewhere.Load(); n != 0 {
		t.Errorf("the redirect was followed %d times", n)
	}
}

// Ensure that a webhook author's credential is sent as Authorization:
// Bearer, and that an endpoint nobody listens on is runtime_unavailable.
func TestWebhookRunner_CredentialAndUnreachable(t *testing.T) {
	hook := newHookServer(t, "")
	dead := httptest.NewServer(http.NotFoundHandler())
	deadURL := dead.URL
	dead.Close()
	g := openRemote(t, rmConfig{
		manifests: []string{
			webhookManifest("echo", hook.URL+"/echo", `{model: free}`, ""),
			webhookManifest("gone", deadURL+"/hook", `{model: per_run, amount: "0.10", currency: EUR}`, ""),
		},
		remote: remote.Config{Credentials: func(id string) (string, bool) { return "tok-" + id, true }},
	})
	if res := g.call(t, "acme/echo", `{"a":1}`, ""); res.Receipt.Status != "succeeded" {
		t.Fatalf("echo: %v (%s)", billingOf(res.Receipt), res.Message)
	}
	if got := hook.last().Header.Get("Authorization"); got != "Bearer tok-acme/echo" {
		t.Errorf("Authorization %q", got)
	}
	res := g.call(t, "acme/gone", `{}`, "")
	if got, want := billingOf(res.Receipt), (billing{"failed", "runtime_unavailable", false, "0.00"}); got != want {
		t.Fatalf("unreachable: %v (%s), want %v", got, res.Message, want)
	}
}

// Ensure that a webhook's 2xx body is passed on exactly, numbers included.
func TestWebhookRunner_OutputVerbatim(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, `{"big":12345678901234567890,"x":0.1}`)
	}))
	defer srv.Close()
	g := openRemote(t, rmConfig{manifests: []string{webhookManifest("num", srv.URL, `{model: free}`, "")}})
	res := g.call(t, "acme/num", `{}`, "")
	if string(res.Output) != `{"big":12345678901234567890,"x":0.1}` {
		t.Fatalf("output %s", res.Output)
	}
	var v map[string]json.Number
	if err := json.Unmarshal(res.Output, &v); err != nil || v["big"] != "12345678901234567890" {
		t.Fatalf("output %s: %v", res.Output, err)
	}
}
