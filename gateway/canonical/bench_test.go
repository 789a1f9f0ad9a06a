package canonical_test

import (
	"encoding/json"
	"testing"

	"holon.dev/holon/gateway/canonical"
)

// BenchmarkRead measures the strict reader on what every call reads: a
// POST /v0/calls body (Decode), a small input (Value, as the input's check
// and schema take it) and a larger document with escapes (Check).
func BenchmarkRead(b *testing.B) {
	body := []byte(`{"mandate":"p07/bench","agent":"bench/echo","input":{"n":7},"max_cost":"0.50"}`)
	type callBody struct {
		Mandate    string          `json:"mandate"`
		Agent      string          `json:"agent"`
		Capability string          `json:"capability"`
		Input      json.RawMessage `json:"input"`
		MaxCost    *string         `json:"max_cost"`
		Approval   string          `json:"approval"`
	}
	doc := []byte(`{"rows":[{"id":1,"name":"caf\u00e9","tags":["a","b"],"score":1.5e3},{"id":2,"name":"tab\there","tags":[],"score":-0.25}],"meta":{"total":2,"next":null,"ok":true}}`)
	b.Run("decode-body", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var v callBody
			if err := canonical.Decode(body, &v); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("value-input", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := canonical.Value([]byte(`{"n":7}`)); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("check-doc", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if err := canonical.Check(doc); err != nil {
				b.Fatal(err)
			}
		}
	})
}
