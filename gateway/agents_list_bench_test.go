package gateway_test

import (
	"context"
	"fmt"
	"testing"

	"holon.dev/holon/gateway"
)

// BenchmarkEngine_ListAgents measures a listing of 2,000 agents under a
// mandate: the first page of everything (every record read and ranked)
// and a search whose text matches one agent.
func BenchmarkEngine_ListAgents(b *testing.B) {
	var ms []string
	for i := range 2000 {
		ms = append(ms, listAgent(fmt.Sprintf("acme/a%04d", i), "1.0.0", fmt.Sprintf("Agent number %04d.", i), "[text.echo]",
			fmt.Sprintf(`{model: per_run, amount: "0.%02d", currency: EUR}`, i%100), "ok"))
	}
	te := newEngine(b, ms, nil, listMandate)
	for _, bm := range []struct {
		name string
		q    gateway.AgentQuery
		want int
	}{
		{"all,page=50", gateway.AgentQuery{Mandate: "alice/list"}, 2000},
		{"q=one", gateway.AgentQuery{Mandate: "alice/list", Text: "number 1234"}, 1},
	} {
		b.Run(bm.name, func(b *testing.B) {
			for b.Loop() {
				p, err := te.eng.ListAgents(context.Background(), bm.q)
				if err != nil || p.Total != bm.want {
					b.Fatalf("total %d, %v; want %d", p.Total, err, bm.want)
				}
			}
		})
	}
}
