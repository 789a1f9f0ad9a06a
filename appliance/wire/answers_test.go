package wire_test

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"testing"
	"time"

	"holon.dev/holon"
	"holon.dev/holon/appliance/wire"
	"holon.dev/holon/journal"
)

// encodingJSON is what web.JSON writes for v.
func encodingJSON(t *testing.T, v any) []byte {
	t.Helper()
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// Ensure that CallAnswer.AppendJSON writes the bytes encoding/json writes
// (as web.JSON sets it: HTML unescaped, a newline after) for the answers
// it takes, with receipts of every shape, outputs written loosely, and
// strings with quotes, controls, non-ASCII and U+2028; and that it
// declines, leaving b as it was, what it does not write: an approval, an
// error, alerts, no receipt, an output that is not JSON, and a receipt
// string with <, > or &.
func TestCallAnswer_AppendJSONSameAsEncodingJSON(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	strs := []string{"", "r1", "p01/bench", `quote " and \ back`, "tab\there\n", "café ü", "line\u2028sep", "\x01\x1f", "bench/echo@1.0.0"}
	pick := func() string { return strs[r.IntN(len(strs))] }
	opt := func() *string {
		if r.IntN(2) == 0 {
			return nil
		}
		s := pick()
		return &s
	}
	amount := func() journal.Amount { return journal.Amount(r.Int64N(1e12)) }
	outputs := []string{`{"n":1}`, "{ \"a\" : [1, 2,\n 3], \"b\": \"x<y\" }", `null`, `"s"`, `[]`, `12.50`}
	for i := range 500 {
		wc := amount()
		rc := &holon.Receipt{ID: pick(), Parent: opt(), Mandate: pick(), Caller: pick(), Agent: opt(), Status: pick(),
			Error: opt(), Approval: opt(), Currency: pick(), Payer: pick(), SubMandate: opt(), Billed: r.IntN(2) == 0,
			Cost:       holon.Cost{Own: amount(), Downstream: amount(), Total: amount()},
			DurationMS: r.Int64N(1e6), Created: time.Unix(r.Int64N(4e9), r.Int64N(1e9)).In(time.FixedZone("", 3600*(r.IntN(25)-12)))}
		if r.IntN(2) == 0 {
			rc.WorstCase = &wc
		}
		for range r.IntN(4) {
			rc.Splits = append(rc.Splits, journal.Share{To: pick(), Amount: amount()})
		}
		if r.IntN(3) > 0 {
			rc.Children = []string{}
			for range r.IntN(3) {
				rc.Children = append(rc.Children, pick())
			}
		}
		ans := wire.CallAnswer{Output: json.RawMessage(outputs[r.IntN(len(outputs))]), Receipt: rc, Replayed: r.IntN(4) == 0}
		prefix := []byte("prefix")
		got, ok := ans.AppendJSON(prefix)
		if !ok {
			t.Fatalf("answer %d: declined %+v", i, ans)
		}
		if want := encodingJSON(t, ans); !bytes.Equal(got[len(prefix):], want) || string(got[:len(prefix)]) != "prefix" {
			t.Fatalf("answer %d:\n got %s\nwant %s", i, got, want)
		}
	}
	base := func() wire.CallAnswer {
		return wire.CallAnswer{Output: json.RawMessage(`{}`), Receipt: &holon.Receipt{ID: "r1", Created: time.Unix(0, 0).UTC()}}
	}
	declined := map[string]func(*wire.CallAnswer){
		"approval":     func(a *wire.CallAnswer) { a.Approval = &holon.Approval{ID: "a1"} },
		"error":        func(a *wire.CallAnswer) { a.Error = &holon.Error{Code: "x"} },
		"alerts":       func(a *wire.CallAnswer) { a.Alerts = []*holon.Alert{} },
		"no receipt":   func(a *wire.CallAnswer) { a.Receipt = nil },
		"bad output":   func(a *wire.CallAnswer) { a.Output = json.RawMessage(`{"a":`) },
		"< in receipt": func(a *wire.CallAnswer) { a.Receipt.Mandate = "a<b" },
		"> in receipt": func(a *wire.CallAnswer) { a.Receipt.Caller = "a>b" },
		"& in receipt": func(a *wire.CallAnswer) { s := "a&b"; a.Receipt.Error = &s },
	}
	for name, change := range declined {
		a := base()
		if _, ok := a.AppendJSON(nil); !ok {
			t.Fatalf("%s: the plain answer is declined", name)
		}
		change(&a)
		b := []byte("kept")
		got, ok := a.AppendJSON(b)
		if ok || string(got) != "kept" {
			t.Errorf("%s: AppendJSON = %q, %v; want it declined and b as it was", name, got, ok)
		}
	}
}
