package publishing

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"net/http"
	"sort"
	"time"

	"github.com/julienschmidt/httprouter"
	"gopkg.in/yaml.v3"

	"holon.dev/holon"
	"holon.dev/holon/appliance/auth"
	"holon.dev/holon/appliance/web"
	"holon.dev/holon/gateway"
	"holon.dev/holon/gateway/contract"
	"holon.dev/holon/journal"
)

// Drafting a webhook listing (gateway.md §6): POST /v0/agents/draft calls
// the endpoint once with the example input, through the guarded client and
// with the credential set for <handle>/<name>, and answers a draft
// manifest whose schemas describe the example input and the answer.
// Nothing is published or stored.

// draftTimeout bounds the one call a draft makes.
const draftTimeout = 30 * time.Second

type draftBody struct {
	Name     string          `json:"name"`
	Endpoint string          `json:"endpoint"`
	Input    json.RawMessage `json:"input"`
	Summary  string          `json:"summary,omitempty"`
	Price    *journal.Amount `json:"price,omitempty"`
}

func (h *handlers) draftAgent(w http.ResponseWriter, r *http.Request, _ httprouter.Params, p *auth.Principal) {
	var body draftBody
	if err := web.DecodeBody(r, &body); err != nil {
		h.fail(w, r, err)
		return
	}
	if !contract.ValidAgentName(body.Name) {
		h.fail(w, r, holon.Errorf(holon.CodeInvalidRequest, "name %q is not an agent name: 1-64 lowercase letters, digits, - and _", body.Name))
		return
	}
	var input any
	if len(body.Input) == 0 || json.Unmarshal(body.Input, &input) != nil || input == nil {
		h.fail(w, r, holon.Errorf(holon.CodeInvalidRequest, `input is required: the example input to send to the endpoint, as JSON (such as {"text": "hello"})`))
		return
	}
	if err := h.p.CheckEndpoint(r.Context(), body.Endpoint); err != nil {
		h.fail(w, r, err)
		return
	}
	summary := body.Summary
	if summary == "" {
		summary = "Draft listing of " + body.Name + ": describe what it does."
	}
	d := map[string]any{
		"id": p.Account + "/" + body.Name, "version": "0.1.0", "summary": summary, "license": contract.LicenseProprietary,
		"interface": map[string]any{"input": map[string]any{}, "output": map[string]any{}},
		"pricing":   map[string]any{"model": contract.PricingFree},
		"runtime":   map[string]any{"kind": contract.RuntimeWebhook, "endpoint": body.Endpoint},
	}
	if body.Price != nil && *body.Price > 0 {
		d["pricing"] = map[string]any{"model": contract.PricingPerRun, "amount": body.Price.String(), "currency": "EUR"}
	}
	probe, err := draftManifest(d)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), draftTimeout)
	defer cancel()
	res := h.p.cfg.Webhook.Run(ctx, &gateway.Invocation{Manifest: probe, Input: body.Input, Receipt: "draft"})
	switch res.Outcome.Kind {
	case contract.OutcomeOutput:
	case contract.OutcomeError:
		h.fail(w, r, holon.Errorf(CodeDraftCallFailed, "the endpoint answered the example input with the error %s (%s): send an input it accepts", res.Outcome.Code, res.Message))
		return
	default:
		h.fail(w, r, holon.Errorf(CodeDraftCallFailed, "calling the endpoint failed: %s", orText(res.Message, "no answer")))
		return
	}
	var output any
	if err := json.Unmarshal(res.Output, &output); err != nil {
		h.fail(w, r, holon.Errorf(CodeDraftCallFailed, "the endpoint's answer is not JSON: %v", err))
		return
	}
	d["interface"] = map[string]any{
		"input": schemaOf(input), "output": schemaOf(output),
		"examples": []any{map[string]any{"input": input, "output": output}},
	}
	m, err := draftManifest(d)
	if err != nil {
		h.fail(w, r, holon.Errorf(CodeDraftCallFailed, "the answer does not make a valid draft: %v", err))
		return
	}
	var y bytes.Buffer
	enc := yaml.NewEncoder(&y)
	enc.SetIndent(2)
	if err := enc.Encode(m); err != nil {
		h.fail(w, r, err)
		return
	}
	web.JSON(w, http.StatusOK, map[string]any{"manifest": m, "yaml": y.String(),
		"note": "Nothing is published: review the draft (summary, schemas, price), then POST it to /v0/agents."})
}

func draftManifest(d map[string]any) (*contract.Manifest, error) {
	b, err := json.Marshal(d)
	if err != nil {
		return nil, err
	}
	return contract.ParseManifest(b)
}

func orText(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// schemaOf is a JSON Schema that describes one example value: its types,
// every property of its objects required, its arrays' items from their
// first element.
func schemaOf(v any) map[string]any {
	switch x := v.(type) {
	case map[string]any:
		props := map[string]any{}
		req := make([]string, 0, len(x))
		for k, e := range x {
			props[k] = schemaOf(e)
			req = append(req, k)
		}
		sort.Strings(req)
		return map[string]any{"type": "object", "required": req, "properties": props}
	case []any:
		s := map[string]any{"type": "array"}
		if len(x) > 0 {
			s["items"] = schemaOf(x[0])
		}
		return s
	case string:
		return map[string]any{"type": "string"}
	case float64:
		if x == math.Trunc(x) && math.Abs(x) < 1<<53 {
			return map[string]any{"type": "integer"}
		}
		return map[string]any{"type": "number"}
	case bool:
		return map[string]any{"type": "boolean"}
	case nil:
		return map[string]any{"type": "null"}
	}
	return map[string]any{}
}
