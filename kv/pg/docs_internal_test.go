package pg

import (
	"bytes"
	"encoding/json"
	"math"
	"math/rand/v2"
	"testing"

	"holon.dev/holon"
	"holon.dev/holon/journal"
)

// Ensure that the earnings and latency documents written by hand are the
// bytes encoding/json writes, for any values: other gateways, backups and
// holon verify read them.
func TestDocsJSON_AsEncodingJSON(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	amounts := []int64{0, 1, -1, 999_999, 1_000_000, -1_000_001, math.MaxInt64, math.MinInt64}
	keys := []string{"EUR", "USD", "usd", "X-1", "a.b", "", "é", "<b>", `q"`, "a b", "\x00"}
	for range 20_000 {
		e := holon.Earnings{}
		if r.IntN(20) == 0 {
			e = nil
		}
		for range r.IntN(4) {
			if e == nil {
				break
			}
			pick := func() int64 {
				if r.IntN(2) == 0 {
					return amounts[r.IntN(len(amounts))]
				}
				return r.Int64N(1<<40) - 1<<39
			}
			e[keys[r.IntN(len(keys))]] = holon.Earned{PaidCalls: pick(), Own: journal.Amount(pick()), Royalties: journal.Amount(pick())}
		}
		want, err := json.Marshal(e)
		if err != nil {
			t.Fatal(err)
		}
		got, err := earningsJSON(e)
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("earnings %#v: %s (%v), encoding/json %s", e, got, err, want)
		}

		var l holon.Latency
		if r.IntN(10) != 0 {
			l.Counts = make([]int64, r.IntN(20))
			for i := range l.Counts {
				l.Counts[i] = amounts[r.IntN(len(amounts))] + r.Int64N(1000)
			}
		}
		if want, _ := json.Marshal(l); !bytes.Equal(latencyJSON(l), want) {
			t.Fatalf("latency %#v: %s, encoding/json %s", l, latencyJSON(l), want)
		}
	}
}

// BenchmarkCountSettled adds a settled call to a version's latency
// histogram and earnings, as each settlement does, from the writer's
// cache: 29 calls, one group.
func BenchmarkCountSettled(b *testing.B) {
	s := &Store{base: layer{}}
	ref := "bench/echo@1.0.0"
	s.base[kMeta("earnings_from")] = entry{v: "1"}
	s.base[kMeta("latency_from")] = entry{v: "1"}
	s.base[kDoc("earnings", []byte(ref))] = entry{v: []byte(`{"EUR":{"paid_calls":12345,"own":"123.456789","royalties":"0.00"}}`)}
	s.base[kDoc("latency", []byte(ref))] = entry{v: []byte(`{"counts":[5,10,200,3000,40,5,0,0,0,0,0,0,0,0,0,0,0,1]}`)}
	b.ReportAllocs()
	for b.Loop() {
		g := &group{s: s, conf: layer{}, rerun: -1, pending: s.pendingBuf()}
		for i := range 29 {
			t := &Tx{s: s, g: g, idx: i, l: layer{}}
			if err := t.AddLatency(ref, int64(i)); err != nil {
				b.Fatal(err)
			}
			if err := t.AddEarnings(ref, "EUR", 1, journal.Amount(9000), 0); err != nil {
				b.Fatal(err)
			}
			g.open = append(g.open, t)
		}
	}
}
