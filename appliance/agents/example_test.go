package agents_test

import (
	"context"
	"encoding/json"
	"fmt"

	"holon.dev/holon/appliance/agents"
	"holon.dev/holon/gateway"
)

// Load a set's manifests, leave out the agents excluded by default, and run
// the others on the dev runtime.
func ExampleLoad() {
	ms, err := agents.Load("agents")
	if err != nil {
		panic(err)
	}
	ms = agents.Without(ms, agents.DefaultExclude)
	rt := gateway.NewDevRuntime()
	agents.Register(rt)
	for _, m := range ms {
		res := rt.Run(context.Background(), &gateway.Invocation{
			Manifest: m,
			Input:    json.RawMessage(`{"csv":"city,pop\nLyon,522000\nNice,\n"}`),
			Receipt:  "r1",
		})
		fmt.Println(m.Ref())
		fmt.Println(string(res.Output))
	}
	// Output:
	// holon-labs/csv-profile@1.0.0
	// {"rows":2,"columns":[{"name":"city","type":"string","count":2,"nulls":0,"min":"Lyon","max":"Nice","distinct":2},{"name":"pop","type":"integer","count":1,"nulls":1,"min":522000,"max":522000,"distinct":1}]}
}
