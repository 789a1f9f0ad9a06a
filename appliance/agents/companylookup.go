package agents

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"

	"holon.dev/holon/gateway"
)

// holon-labs/company-lookup: examples/company-lookup/holon.yaml, over the
// fictional register in examples/company-lookup/companies.json.
//
// A name matches when it equals a registered name ignoring case and
// surrounding white space, with runs of inner white space read as one space
// ("  acme   corp " finds ACME Corp). The output gives the name as
// registered.

type companyLookupInput struct {
	Name string `json:"name"`
}

type company struct {
	Name         string `json:"name"`
	Country      string `json:"country"`
	Registration string `json:"registration"`
}

// register is the embedded list, read once; it is never modified.
var register = sync.OnceValues(func() ([]company, error) {
	b, err := files.ReadFile("examples/company-lookup/companies.json")
	if err != nil {
		return nil, err
	}
	var cs []company
	if err := json.Unmarshal(b, &cs); err != nil {
		return nil, fmt.Errorf("companies.json: %w", err)
	}
	return cs, nil
})

func companyLookup(ctx context.Context, input json.RawMessage, c *gateway.Ctx) (any, error) {
	var in companyLookupInput
	if err := json.Unmarshal(input, &in); err != nil {
		return nil, fmt.Errorf("read input: %w", err)
	}
	cs, err := register()
	if err != nil {
		return nil, fmt.Errorf("read register: %w", err)
	}
	want := companyKey(in.Name)
	for _, co := range cs {
		if companyKey(co.Name) == want {
			return co, nil
		}
	}
	return nil, c.Error("not_found", fmt.Sprintf("no company named %q in the register", in.Name))
}

// companyKey is the form two names are compared in.
func companyKey(name string) string {
	return strings.ToLower(strings.Join(strings.Fields(name), " "))
}
