package remote_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"holon.dev/holon"
	"holon.dev/holon/gateway"
)

// Ensure that Try (evaluations, the demo) holds answers and inputs to
// strict JSON exactly as a call does: a duplicate key or a number beyond
// a double in the answer is invalid_output, even where the last value
// would match interface.output, and an input that is not strict JSON is
// refused before the agent is sent anything.
func TestEngine_TryIsStrictJSON(t *testing.T) {
	answers := map[string]string{
		"/dup":  `{"words":"x","words":1}`,
		"/huge": `{"words":1,"n":1e400}`,
		"/ok":   `{"words":7}`,
	}
	var mu sync.Mutex
	var got []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		got = append(got, r.URL.Path+" "+string(b))
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, answers[r.URL.Path])
	}))
	defer srv.Close()
	var ms []string
	for path := range answers {
		ms = append(ms, strictManifest(path[1:], "webhook", srv.URL+path, ""))
	}
	g := openRemote(t, rmConfig{manifests: ms})
	try := func(name, input string) gateway.TryResult {
		v, ok := g.eng.Registry().Get("acme/" + name + "@1.0.0")
		if !ok {
			t.Fatalf("acme/%s is not listed", name)
		}
		return g.eng.Try(context.Background(), v, "eval", json.RawMessage(input), 0)
	}
	for _, name := range []string{"dup", "huge"} {
		res := try(name, `{"n":1}`)
		if res.Error != holon.CodeInvalidOutput || res.Output != nil || !strings.Contains(res.Message, "not strict JSON") {
			t.Errorf("%s answering %s: %+v, want invalid_output (not strict JSON)", name, answers["/"+name], res)
		}
	}
	if res := try("ok", `{"n":1}`); res.Error != "" || string(res.Output) != `{"words":7}` {
		t.Errorf("ok: %+v", res)
	}
	for _, input := range []string{`{"n":1000,"n":1}`, `{"n":1e400}`} {
		if res := try("ok", input); res.Error != holon.CodeRejectedInput || !strings.Contains(res.Message, "input") {
			t.Errorf("input %s: %+v, want rejected_input", input, res)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 3 {
		t.Errorf("the agents received %q, want three strict inputs only", got)
	}
}
