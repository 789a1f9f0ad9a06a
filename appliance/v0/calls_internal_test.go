package v0

import (
	"bytes"
	"encoding/json"
	"testing"

	"holon.dev/holon/gateway/canonical"
	"holon.dev/holon/journal"
)

// checkCanonicalRequest fails unless the canonical form an
// Idempotency-Key binds a call's body by, written by hand
// (idempotency.CallRequest.AppendCanonical), is the one canonical.JSON
// gives for json.Marshal's encoding of the body, which stored keys were
// hashed from: the same bytes, or an error from both.
func checkCanonicalRequest(t *testing.T, body *callBody) {
	t.Helper()
	var want []byte
	m, err := json.Marshal(body)
	if err == nil {
		want, err = canonical.JSON(m)
	}
	got, gotErr := body.request().AppendCanonical(nil)
	switch {
	case (err == nil) != (gotErr == nil):
		t.Fatalf("body %+v: by hand err %v, through json.Marshal err %v", body, gotErr, err)
	case err == nil && !bytes.Equal(got, want):
		t.Fatalf("body %+v:\n by hand %s\n want    %s", body, got, want)
	}
}

// Ensure that the hand-written canonical request is byte for byte the
// one json.Marshal and canonical.JSON give, for bodies as the API decodes
// them (seeds and fuzzed bodies) and for Go strings JSON never decodes to
// (invalid UTF-8, which json.Marshal coerces).
func FuzzCallBody_CanonicalRequest(f *testing.F) {
	for _, s := range []string{
		`{"mandate":"ann/m","agent":"lena/echo","input":{"n":1}}`,
		`{"agent":"lena/echo","input":{"b":[1,2.50,1e21,-0,1E-7],"a":{"z":null,"y":true}}}`,
		`{"mandate":"a<b>&c","capability":"x.y","input":"\u2028\u0007\"\\","max_cost":"0.05","approval":"apv_1"}`,
		`{"mandate":"m","agent":"é€😀","input":{"😀":1,"\ue000":2,"a":3,"":4}}`,
		`{"mandate":"m","agent":"a","input":null}`,
		`{"mandate":"m","agent":"a"}`,
		`{"mandate":"m","agent":"a","input":{"a":1,"a":2}}`,
		`{"mandate":"m","agent":"a","input":"\ud800"}`,
		`{"mandate":"m","agent":"a","input":1e400}`,
		`{"mandate":"m","agent":"a","max_cost":"12.000001","input":[[[{}]]]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var body callBody
		if json.Unmarshal(b, &body) != nil {
			return
		}
		checkCanonicalRequest(t, &body)
	})
}

func TestCallBody_CanonicalRequest_InvalidUTF8(t *testing.T) {
	cost := journal.MustParseAmount("1.5")
	for _, body := range []callBody{
		{Mandate: "m\xff", Agent: "a\xc3", Input: json.RawMessage(`{}`)},
		{Mandate: "m", Capability: "\xed\xa0\x80x", Approval: "\x80\x80", Input: json.RawMessage(` [ 1 , 2 ] `), MaxCost: &cost},
	} {
		checkCanonicalRequest(t, &body)
	}
}
