package agents_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"holon.dev/holon/appliance/agents"
	"holon.dev/holon/gateway"
	"holon.dev/holon/gateway/contract"
	"holon.dev/holon/journal"
)

// messagesCall is one request the fake Messages API saw.
type messagesCall struct {
	Header http.Header
	Path   string
	Body   struct {
		Model     string `json:"model"`
		MaxTokens int    `json:"max_tokens"`
		System    string `json:"system"`
		Messages  []struct {
			Role    string `json:"role"`
			Content string `json:"content"`
		} `json:"messages"`
	}
}

// document is the text a request asks to summarize.
func (c messagesCall) document() string {
	if len(c.Body.Messages) == 0 {
		return ""
	}
	_, doc, _ := strings.Cut(c.Body.Messages[0].Content, "<document>\n")
	doc, _, _ = strings.Cut(doc, "\n</document>")
	return doc
}

// fakeMessages is a fake of Anthropic's Messages API on loopback: it
// checks the key, records each request and answers with reply's status and
// body.
type fakeMessages struct {
	*httptest.Server
	mu    sync.Mutex
	calls []messagesCall
}

const fakeKey = "sk-ant-test-key"

func newFakeMessages(t *testing.T, reply func(messagesCall) (int, string)) *fakeMessages {
	t.Helper()
	f := &fakeMessages{}
	f.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c := messagesCall{Header: r.Header.Clone(), Path: r.URL.Path}
		b, _ := io.ReadAll(r.Body)
		if err := json.Unmarshal(b, &c.Body); err != nil {
			w.WriteHeader(http.StatusBadRequest)
			io.WriteString(w, `{"type":"error","error":{"type":"invalid_request_error","message":"bad json"}}`)
			return
		}
		f.mu.Lock()
		f.calls = append(f.calls, c)
		f.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		if r.Header.Get("x-api-key") != fakeKey {
			w.WriteHeader(http.StatusUnauthorized)
			io.WriteString(w, `{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"}}`)
			return
		}
		status, body := reply(c)
		w.WriteHeader(status)
		io.WriteString(w, body)
	}))
	t.Cleanup(f.Close)
	return f
}

func (f *fakeMessages) Calls() []messagesCall {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]messagesCall(nil), f.calls...)
}

func (f *fakeMessages) config() agents.SummarizeConfig {
	return agents.SummarizeConfig{APIKey: fakeKey, BaseURL: f.URL}
}

// message is a Messages API answer with this text and usage.
func message(text string, in, out int) string {
	b, _ := json.Marshal(map[string]any{
		"id": "msg_test", "type": "message", "role": "assistant", "model": "claude-haiku-4-5",
		"content":     []map[string]string{{"type": "text", "text": text}},
		"stop_reason": "end_turn",
		"usage":       map[string]int{"input_tokens": in, "output_tokens": out},
	})
	return string(b)
}

// examplesMessagesAPI answers summarize's examples with their outputs, as
// the model would.
func examplesMessagesAPI(t *testing.T) agents.SummarizeConfig {
	t.Helper()
	m := manifest(t, "holon-labs/summarize")
	answers := map[string]string{}
	for _, ex := range m.Interface.Examples {
		in, _ := ex.Input.(map[string]any)
		out, _ := ex.Output.(map[string]any)
		if text, ok := in["text"].(string); ok && out != nil {
			answers[text] = out["summary"].(string)
		}
	}
	f := newFakeMessages(t, func(c messagesCall) (int, string) {
		s, ok := answers[c.document()]
		if !ok {
			return http.StatusBadRequest, `{"type":"error","error":{"type":"invalid_request_error","message":"not an example"}}`
		}
		return http.StatusOK, message(s, 180, 25)
	})
	return f.config()
}

// runSummarize runs summarize on the dev runtime with cfg and a cap.
func runSummarize(t *testing.T, cfg agents.SummarizeConfig, input string, maxCost string) (gateway.RunResult, contract.Bill) {
	t.Helper()
	m := manifest(t, "holon-labs/summarize")
	if err := m.InputSchema().ValidateJSON([]byte(input)); err != nil {
		t.Fatalf("input %s: %v", input, err)
	}
	rt := gateway.NewDevRuntime()
	agents.RegisterWith(rt, agents.Options{Summarize: cfg})
	inv := &gateway.Invocation{Manifest: m, Input: json.RawMessage(input), Receipt: "r1"}
	var mc *journal.Amount
	if maxCost != "" {
		a := journal.MustParseAmount(maxCost)
		mc, inv.MaxCost = &a, &a
	}
	res := rt.Run(context.Background(), inv)
	if res.Outcome.Kind == contract.OutcomeOutput {
		if err := m.OutputSchema().ValidateJSON(res.Output); err != nil {
			t.Fatalf("output %s: %v", res.Output, err)
		}
	}
	return res, contract.DecideBilling(m, res.Outcome, mc, journal.One)
}

// textOf is a text of n bytes.
func textOf(n int) string { return strings.Repeat("Holon bills calls. ", n/19+1)[:n] }

// Ensure that summarize sends the text to the Messages API with the key,
// the version and the model, returns the model's summary, and reports the
// tokens the API counted, input and output, in thousands rounded up: billed
// 0.01 per thousand.
func TestSummarize_Units(t *testing.T) {
	f := newFakeMessages(t, func(c messagesCall) (int, string) {
		return http.StatusOK, message("  A short summary.  ", 2345, 120)
	})
	text := textOf(6000)
	res, bill := runSummarize(t, f.config(), `{"text":"`+text+`","max_words":40}`, "")
	if res.Outcome.Kind != contract.OutcomeOutput || string(res.Output) != `{"summary":"A short summary."}` {
		t.Fatalf("outcome %v %s (%s)", res.Outcome.Kind, res.Output, res.Message)
	}
	if res.Outcome.Units != int64(3) {
		t.Errorf("units %v, want 3 (2,465 tokens)", res.Outcome.Units)
	}
	if !bill.Billed || bill.Charge.String() != "0.03" {
		t.Errorf("bill %+v, want 0.03", bill)
	}
	calls := f.Calls()
	if len(calls) != 1 {
		t.Fatalf("%d requests, want 1", len(calls))
	}
	c := calls[0]
	if c.Path != "/v1/messages" || c.Header.Get("anthropic-version") != "2023-06-01" ||
		c.Body.Model != agents.DefaultSummarizeModel || c.Body.MaxTokens != 2*40+16 ||
		c.document() != text || !strings.Contains(c.Body.Messages[0].Content, "at most 40 words") {
		t.Errorf("request %s %v model %q max_tokens %d, content %.120q", c.Path, c.Header, c.Body.Model, c.Body.MaxTokens, c.Body.Messages)
	}
}

// Ensure that summarize refuses up front, with over_budget (never billed),
// when its estimate is above the caller's max_cost, without calling the
// API; and runs when the estimate fits.
func TestSummarize_OverBudget(t *testing.T) {
	f := newFakeMessages(t, func(c messagesCall) (int, string) {
		return http.StatusOK, message("Fits.", 1900, 20)
	})
	// 6,000 bytes ≈ 2,000 tokens, with the instructions and a 150-word
	// summary (316 tokens): 2,436 tokens, 3 units, 0.03.
	input := `{"text":"` + textOf(6000) + `"}`
	res, bill := runSummarize(t, f.config(), input, "0.02")
	if res.Outcome.Kind != contract.OutcomeError || res.Outcome.Code != "over_budget" || bill.Billed || bill.Error != "over_budget" {
		t.Fatalf("outcome %v %q (%s), bill %+v; want over_budget, not billed", res.Outcome.Kind, res.Outcome.Code, res.Message, bill)
	}
	if !strings.Contains(res.Message, "0.03") || !strings.Contains(res.Message, "0.02") {
		t.Errorf("message %q should name the estimate and the cap", res.Message)
	}
	if n := len(f.Calls()); n != 0 {
		t.Fatalf("the API was called %d times for a run refused up front", n)
	}
	res, bill = runSummarize(t, f.config(), input, "0.03")
	if res.Outcome.Kind != contract.OutcomeOutput || bill.Charge.String() != "0.02" {
		t.Fatalf("at the estimate: %v (%s), bill %+v; want an output billed 0.02 (1,920 tokens)", res.Outcome.Kind, res.Message, bill)
	}
	if n := len(f.Calls()); n != 1 {
		t.Fatalf("the API was called %d times, want 1", n)
	}
}

// Ensure that summarize's failures are named and never billed: an empty
// text (declared, no request), an API error (declared upstream_failed), a
// refused key (upstream_failed), and no key at all (agent_error).
func TestSummarize_Failures(t *testing.T) {
	f := newFakeMessages(t, func(c messagesCall) (int, string) {
		return 529, `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`
	})
	for _, tt := range []struct {
		name  string
		cfg   agents.SummarizeConfig
		input string
		kind  contract.OutcomeKind
		code  string
		msg   string
	}{
		{"empty text", f.config(), `{"text":" \n "}`, contract.OutcomeError, "empty_text", "white space"},
		{"overloaded", f.config(), `{"text":"hello"}`, contract.OutcomeError, "upstream_failed", "overloaded_error"},
		{"wrong key", agents.SummarizeConfig{APIKey: "nope", BaseURL: f.URL}, `{"text":"hello"}`, contract.OutcomeError, "upstream_failed", "authentication_error"},
		{"no key", agents.SummarizeConfig{BaseURL: f.URL}, `{"text":"hello"}`, contract.OutcomeCrash, "", "ANTHROPIC_API_KEY"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			res, bill := runSummarize(t, tt.cfg, tt.input, "")
			if res.Outcome.Kind != tt.kind || res.Outcome.Code != tt.code || !strings.Contains(res.Message, tt.msg) {
				t.Fatalf("outcome %v %q (%s), want %v %q saying %q", res.Outcome.Kind, res.Outcome.Code, res.Message, tt.kind, tt.code, tt.msg)
			}
			if bill.Billed {
				t.Errorf("billed: %+v", bill)
			}
		})
	}
	if n := len(f.Calls()); n != 2 {
		t.Errorf("the API saw %d requests, want 2 (not for the empty text, nor without a key)", n)
	}
}

// Ensure that HOLON_EXCLUDE defaults to summarize and sec-company, that
// "none" excludes nothing, and that a malformed id is refused.
func TestParseExclude(t *testing.T) {
	for in, want := range map[string]string{
		"":                                 "holon-labs/summarize,holon-labs/sec-company",
		"none":                             "",
		"holon-labs/sec-company":           "holon-labs/sec-company",
		" acme/a , holon-labs/summarize ,": "acme/a,holon-labs/summarize",
	} {
		got, err := agents.ParseExclude(in)
		if err != nil || strings.Join(got, ",") != want {
			t.Errorf("ParseExclude(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	if _, err := agents.ParseExclude("summarize"); err == nil {
		t.Error("ParseExclude(summarize): no error for an id without a namespace")
	}
	ms := agents.Without(load(t, "agents"), agents.DefaultExclude)
	if len(ms) != 1 || ms[0].ID != "holon-labs/csv-profile" {
		t.Errorf("the agents set without the default exclusions: %v", ms)
	}
}
