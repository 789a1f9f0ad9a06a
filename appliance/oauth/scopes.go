package oauth

import (
	"net/http"
	"slices"
	"strings"

	"holon.dev/holon"
	"holon.dev/holon/appliance/web"
)

// The scopes an access token may carry, each named for what it lets the
// client do. A token reaches only the routes of its scopes.
const (
	// ScopeAgents: call agents through /mcp (search, call, approvals,
	// receipts of its calls), under the mandate the human chose.
	ScopeAgents = "agents:call"
	// ScopeFiles: upload files through POST /v0/files, to hand their
	// handles to agents in calls.
	ScopeFiles = "files:upload"
	// ScopeReceipts: read the receipts of the key's mandate through
	// GET /v0/receipts and GET /v0/receipts/{id}.
	ScopeReceipts = "receipts:read"
)

// CodeInsufficientScope: the access token is good, but not for this
// request: the message names the scope it needs (RFC 6750 §3.1).
const CodeInsufficientScope = "insufficient_scope"

// scopeInfo is a scope and what the consent page says it lets the
// application do.
type scopeInfo struct {
	Name   string `json:"name"`
	Allows string `json:"allows"`
}

// scopes are every scope offered, in the order the consent page lists
// them.
var scopes = []scopeInfo{
	{ScopeAgents, "search agents and call them through MCP, paying from the mandate you pick, within its budget; see the receipts of its calls"},
	{ScopeFiles, "upload files to your account (each kept until it expires) and hand them to the agents it calls"},
	{ScopeReceipts, "read the receipts of every call made under that mandate, with their inputs' summaries and costs"},
}

// scopeNames lists the scopes offered, as the metadata documents do.
func scopeNames() []string {
	out := make([]string, len(scopes))
	for i, s := range scopes {
		out[i] = s.Name
	}
	return out
}

// grantScope is the scope a token gets for a request's scope parameter:
// the offered scopes it names, in the offered order; the names this
// server does not offer are dropped (RFC 6749 §3.3 lets the server grant
// less than asked, saying so in the token answer). A request naming none
// of them (most clients send no scope) gets ScopeAgents, what every
// token could do before scopes existed.
func grantScope(requested string) (granted []string, unknown []string) {
	asked := strings.Fields(requested)
	for _, s := range scopes {
		if slices.Contains(asked, s.Name) {
			granted = append(granted, s.Name)
		}
	}
	for _, a := range asked {
		if !slices.Contains(scopeNames(), a) && !slices.Contains(unknown, a) {
			unknown = append(unknown, a)
		}
	}
	if len(granted) == 0 {
		granted = []string{ScopeAgents}
	}
	return granted, unknown
}

// storedScope is the scope a stored grant carries: what grantScope
// keeps of it (a grant stored before scopes existed carries the client's
// request as it was, or nothing: ScopeAgents).
func storedScope(s string) []string {
	granted, _ := grantScope(s)
	return granted
}

// scopeInfos describes scopes for the consent page.
func scopeInfos(names []string) []scopeInfo {
	var out []scopeInfo
	for _, s := range scopes {
		if slices.Contains(names, s.Name) {
			out = append(out, s)
		}
	}
	return out
}

// routeScope is the scope a request needs of an access token, and false
// for a route no scope reaches (the rest of the HTTP API takes keys).
func routeScope(r *http.Request) (string, bool) {
	p := r.URL.Path
	switch {
	case p == "/mcp":
		return ScopeAgents, true
	case p == "/v0/files" && r.Method == http.MethodPost:
		return ScopeFiles, true
	case (p == "/v0/receipts" || strings.HasPrefix(p, "/v0/receipts/")) && (r.Method == http.MethodGet || r.Method == http.MethodHead):
		return ScopeReceipts, true
	}
	return "", false
}

// scopeError is a refusal for want of a scope: the challenge names the
// scope in WWW-Authenticate.
type scopeError struct {
	scope string
	err   *holon.Error
}

func (e *scopeError) Error() string { return e.err.Error() }
func (e *scopeError) Unwrap() error { return e.err }

// needScope refuses a token whose scopes lack the one its route needs.
func needScope(r *http.Request, have []string) error {
	need, ok := routeScope(r)
	if !ok {
		return holon.Errorf(web.CodeInvalidKey, "an OAuth access bearer reaches only /mcp (scope %s), POST /v0/files (%s) and GET /v0/receipts (%s); the rest of the HTTP API takes keys (hlk_h_… or hlk_a_…)", ScopeAgents, ScopeFiles, ScopeReceipts)
	}
	if slices.Contains(have, need) {
		return nil
	}
	return &scopeError{scope: need, err: holon.Errorf(CodeInsufficientScope,
		"%s %s needs the scope %s, which this access token was not granted (it has %s): authorize again asking for scope=%q",
		r.Method, r.URL.Path, need, strings.Join(have, " "), strings.Join(append(slices.Clone(have), need), " "))}
}
