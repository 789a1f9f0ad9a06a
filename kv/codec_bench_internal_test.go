package kv

import (
	"encoding/json"
	"testing"
	"time"

	"holon.dev/holon"
	"holon.dev/holon/journal"
)

// BenchmarkCodec_Receipt compares the hand-written codec of a settled
// receipt with encoding/json's.
func BenchmarkCodec_Receipt(b *testing.B) {
	agent, w := "bench/echo@1.0.0", journal.MustParseAmount("0.01")
	r := &holon.Receipt{ID: "r123456", Mandate: "p01/bench", Caller: "p01/client", Agent: &agent, Status: "succeeded",
		WorstCase: &w, Currency: "EUR", Payer: "p01", Billed: true, Cost: holon.Cost{Own: w, Total: w},
		Splits:   []journal.Share{{To: "bench", Amount: 9000}, {To: "holon", Amount: 1000}},
		Children: []string{}, DurationMS: 3, Created: time.Now().UTC()}
	doc, err := json.Marshal(r)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("decode", func(b *testing.B) {
		for range b.N {
			var x holon.Receipt
			if err := decodeValue(doc, &x); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("decode/encoding-json", func(b *testing.B) {
		for range b.N {
			var x holon.Receipt
			if err := json.Unmarshal(doc, &x); err != nil {
				b.Fatal(err)
			}
		}
	})
	buf := make([]byte, 0, 1024)
	b.Run("encode", func(b *testing.B) {
		for range b.N {
			if _, err := encodeValue(buf[:0], r); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("encode/encoding-json", func(b *testing.B) {
		for range b.N {
			if _, err := json.Marshal(r); err != nil {
				b.Fatal(err)
			}
		}
	})
}
