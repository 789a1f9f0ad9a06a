package v0

import (
	"encoding/json"
	"log/slog"
	"net/http"
	"strings"

	"holon.dev/holon"
	"holon.dev/holon/appliance/web"
	"holon.dev/holon/gateway"
	"holon.dev/holon/journal"
)

// Remote delegation at the API (spec/README.md, last row): a remote
// orchestrator makes its downstream calls with POST /v0/calls and
// Authorization: Bearer <delegation token>, the token of the grant it
// received in _meta["holon/delegation"] (or x-holon-delegation). The token
// acts under its run's sub-mandate only, and only while that run lasts; the
// engine applies every rule of gateway.md §3 to its calls.

// delegatedCallBody is POST /v0/calls under a delegation token. max_cost is
// in the orchestrator's own currency, like the max_cost of its declared
// calls and the holon/max_cost it was given; mandate, when sent, must be
// the run's sub-mandate.
type delegatedCallBody struct {
	Mandate    string          `json:"mandate,omitempty"`
	Agent      string          `json:"agent,omitempty"`
	Capability string          `json:"capability,omitempty"`
	Input      json.RawMessage `json:"input"`
	MaxCost    *journal.Amount `json:"max_cost,omitempty"`
	Approval   string          `json:"approval,omitempty"`
}

// delegationToken returns the bearer token of a request when it is a
// delegation token.
func delegationToken(r *http.Request) (string, bool) {
	token, ok := web.Bearer(r)
	return token, ok && strings.HasPrefix(token, gateway.DelegationTokenPrefix)
}

// WithDelegatedCalls serves POST /v0/calls for requests that carry a
// delegation token, before any API-key authentication, and passes every
// other request to next.
func WithDelegatedCalls(e *gateway.Engine, log *slog.Logger, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !serveDelegated(e, log, w, r) {
			next.ServeHTTP(w, r)
		}
	})
}

// serveDelegated serves a request to /v0/calls that carries a delegation
// token, and reports whether it did (false: the request is not one).
func serveDelegated(e *gateway.Engine, log *slog.Logger, w http.ResponseWriter, r *http.Request) bool {
	token, ok := delegationToken(r)
	if !ok || r.URL.Path != "/v0/calls" {
		return false
	}
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		web.MethodNotAllowed(w, "a delegation token is only good for POST /v0/calls")
		return true
	}
	serveDelegatedCall(e, log, w, r, token)
	return true
}

// serveDelegatedCall runs one delegated call and answers like POST
// /v0/calls: {output, receipt, error?} with the receipt's status; a token
// that is unknown, expired, or whose run ended gets 401 invalid_token.
func serveDelegatedCall(e *gateway.Engine, log *slog.Logger, w http.ResponseWriter, r *http.Request, token string) {
	fail := func(err error) {
		ge, status, internal := web.Public(err)
		if internal {
			log.Error("delegated call failed", "err", err)
		}
		web.Error(w, status, ge)
	}
	// The token first: a dead token learns nothing about the body.
	if _, err := e.DelegationMandate(token); err != nil {
		fail(err)
		return
	}
	var body delegatedCallBody
	if err := web.DecodeBody(r, &body); err != nil {
		fail(err)
		return
	}
	switch {
	case (body.Agent == "") == (body.Capability == ""):
		fail(holon.Errorf(holon.CodeInvalidRequest, "name exactly one of agent and capability"))
		return
	case body.Approval != "":
		fail(holon.Errorf(holon.CodeInvalidRequest, "a delegated call cannot use an approval: inside a delegated run nobody can approve"))
		return
	case r.Header.Get("Idempotency-Key") != "":
		fail(holon.Errorf(holon.CodeInvalidRequest, "Idempotency-Key is not supported with a delegation token: a delegated call lives only as long as its run"))
		return
	}
	out, err := e.CallDelegated(r.Context(), gateway.DelegatedCall{
		Token:   token,
		Mandate: body.Mandate,
		Target:  gateway.Target{Agent: body.Agent, Capability: body.Capability, MaxCost: body.MaxCost},
		Input:   body.Input,
	})
	if err != nil {
		fail(err)
		return
	}
	if out.Receipt == "" {
		// Refused before any receipt (a malformed target, max_cost out of range).
		code := out.Error
		if code == "" {
			code = holon.CodeGatewayError
		}
		web.Answer(w, &holon.Error{Code: code, Msg: out.Message})
		return
	}
	rc, err := e.Receipt(out.Receipt)
	if err != nil {
		fail(err)
		return
	}
	status, ans := answer(&gateway.CallResult{Output: out.Output, Receipt: rc, Message: out.Message})
	callJSON(w, status, ans)
}
