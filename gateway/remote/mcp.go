package remote

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"holon.dev/holon"
	"holon.dev/holon/gateway"
	"holon.dev/holon/gateway/contract"
)

// MCPRunner runs agents of runtime.kind mcp: MCP servers over Streamable
// HTTP, following the Holon MCP agent profile (gateway.md §6).
//
//	request  arguments                      the input
//	request  _meta["holon/max_cost"]        {amount, currency}, when the caller set a cap
//	request  _meta["holon/delegation"]      {url, token, expires}, when the agent declares calls
//	request  _meta["holon/files"]           {handle: {url, content_type, size, sha256, expires}}, when the input names files
//	result   structuredContent              the output (else the first text block, as JSON)
//	result   isError + structuredContent.error.code   a failure, billed as declared
//	result   _meta["holon/units"], ["holon/quote"]     for per_unit and quote pricing
//
// Sessions are stateful (the hard timeout then cancels the agent's
// handler) and pooled per endpoint.
type MCPRunner struct {
	cfg  Config
	http *remoteHTTP
	pool *sessionPool
}

// MCPProtocolVersion is the MCP version the runner asks for: the newest
// one stateful Streamable HTTP servers speak, with which a client's
// cancellation reaches the server's handler.
const MCPProtocolVersion = "2025-11-25"

// NewMCPRunner returns the runner of mcp agents. Close it to close its
// sessions.
func NewMCPRunner(cfg Config) *MCPRunner {
	cfg = cfg.withDefaults()
	return &MCPRunner{
		cfg:  cfg,
		http: newRemoteHTTP(cfg),
		pool: newSessionPool(cfg.MaxSessions, cfg.IdleTimeout, cfg.Now),
	}
}

// Close closes the idle sessions and refuses further runs.
func (r *MCPRunner) Close() error {
	r.pool.close()
	r.http.closeIdle()
	return nil
}

// OpenSessions counts the sessions open to an endpoint (for a shipped agent
// when exempt), in use or idle: for tests and metrics.
func (r *MCPRunner) OpenSessions(endpoint string, exempt bool, token string) int {
	return r.pool.open(newPoolKey(endpoint, exempt, token))
}

// Run calls the agent's tool. A call is retried once, on a fresh session
// over a fresh connection, only when provably nothing of it reached the
// agent: it was not written (the pooled session was dead), or the server
// answered 404 (it no longer knows the session: it restarted). A call
// written on a kept-alive connection that then failed before any answer may
// have reached the agent, which may have acted on it: it is never sent
// again.
func (r *MCPRunner) Run(ctx context.Context, inv *gateway.Invocation) gateway.RunResult {
	m := inv.Manifest
	meta := map[string]any{}
	if inv.MaxCost != nil && m.Currency() != "" {
		meta["holon/max_cost"] = map[string]string{"amount": inv.MaxCost.String(), "currency": m.Currency()}
	}
	if len(inv.Files) > 0 {
		meta["holon/files"] = inv.Files
	}
	if res, ok := grantFor(ctx, inv, func(g gateway.DelegationGrant) { meta["holon/delegation"] = g }); !ok {
		return res
	}
	token, _ := r.cfg.credential(m.ID)
	key := newPoolKey(m.Runtime.Endpoint, inv.Shipped, token)
	var cprobe *callProbe // the handshake's, when a session is opened
	connect := func(ctx context.Context) (*mcpSession, error) {
		cprobe = &callProbe{}
		return dialMCP(withProbe(ctx, cprobe), m.Runtime.Endpoint, r.http.client(inv.Shipped, token))
	}
	params := &toolParams{Name: m.Runtime.Tool, Arguments: inv.Input}
	if len(meta) > 0 {
		params.Meta = meta
	}
	for attempt := 0; ; attempt++ {
		cprobe = nil
		s, err := r.pool.acquire(ctx, key, connect)
		if err != nil {
			var st probeState
			if cprobe != nil {
				st = cprobe.state()
			}
			return r.connectFailed(ctx, m, err, st)
		}
		probe := &callProbe{}
		res, err := s.cs.callTool(withProbe(ctx, probe), params)
		st := probe.state()
		switch {
		case err == nil:
			r.pool.release(s)
			return mcpResult(res)
		case ctx.Err() != nil:
			// The server was told the request is cancelled; the session
			// itself is still good.
			r.pool.release(s)
			return gateway.RunResult{Outcome: contract.Outcome{Kind: contract.OutcomeTimeout}}
		}
		r.pool.drop(s)
		if st.stale {
			// The kept-alive connection was dead: the next call dials afresh.
			r.http.dropStale(inv.Shipped)
		}
		if attempt == 0 && (!st.sent || st.status == http.StatusNotFound) {
			// Nothing reached a live session (it was dead, or the server no
			// longer knows it): once more, on a fresh session over a fresh
			// connection.
			continue
		}
		return r.callFailed(m, err, st)
	}
}

// grantFor adds the run's delegation grant, when its agent declares calls;
// ok is false (and res the failure) when the grant cannot be issued.
func grantFor(ctx context.Context, inv *gateway.Invocation, add func(gateway.DelegationGrant)) (res gateway.RunResult, ok bool) {
	if inv.Delegate == nil {
		return gateway.RunResult{}, true
	}
	g, isGranter := inv.Delegate.(gateway.DelegationGranter)
	if !isGranter {
		return gateway.RunResult{}, true
	}
	grant, err := g.Grant(ctx)
	if err != nil {
		return gateway.RunResult{Outcome: contract.Outcome{Kind: contract.OutcomeGatewayError}, Message: holon.ErrorMessage(err)}, false
	}
	add(grant)
	return gateway.RunResult{}, true
}

// connectFailed is the outcome of a session that could not be opened:
// nothing of the call reached the agent.
func (r *MCPRunner) connectFailed(ctx context.Context, m *contract.Manifest, err error, st probeState) gateway.RunResult {
	if ctx.Err() != nil {
		return gateway.RunResult{Outcome: contract.Outcome{Kind: contract.OutcomeTimeout}}
	}
	msg := fmt.Sprintf("cannot open an MCP session with %s: %v", m.Runtime.Endpoint, err)
	switch b, blocked := blockedAddress(err); {
	case blocked:
		msg = b.Error()
	case st.oversize:
		msg = fmt.Sprintf("%s answered the MCP handshake with more than %d bytes", m.Runtime.Endpoint, r.cfg.MaxResponseBytes)
	case st.status >= 300 && st.status < 400:
		msg = redirectMessage(st.status, st.location)
	}
	return gateway.RunResult{Outcome: contract.Outcome{Kind: contract.OutcomeUnavailable}, Message: msg}
}

// callFailed is the outcome of a tools/call that got no result.
func (r *MCPRunner) callFailed(m *contract.Manifest, err error, st probeState) gateway.RunResult {
	crash := func(format string, args ...any) gateway.RunResult {
		return gateway.RunResult{Outcome: contract.Outcome{Kind: contract.OutcomeCrash}, Message: fmt.Sprintf(format, args...)}
	}
	var werr *jsonrpc.Error
	switch b, blocked := blockedAddress(err); {
	case blocked:
		return gateway.RunResult{Outcome: contract.Outcome{Kind: contract.OutcomeUnavailable}, Message: b.Error()}
	case st.oversize:
		return crash("the answer of %s is larger than %d bytes: refused", m.Ref(), r.cfg.MaxResponseBytes)
	case st.status >= 300 && st.status < 400:
		return crash("%s", redirectMessage(st.status, st.location))
	case !st.sent, st.stale, st.status == http.StatusNotFound,
		st.status == http.StatusTooManyRequests, st.status >= 500:
		return gateway.RunResult{Outcome: contract.Outcome{Kind: contract.OutcomeUnavailable},
			Message: fmt.Sprintf("%s is unavailable: %v", m.Runtime.Endpoint, err)}
	case st.status == 0:
		return crash("the connection to %s failed after the request was sent: %v", m.Runtime.Endpoint, err)
	case errors.As(err, &werr):
		return crash("tool %q of %s answered a protocol error: %s", m.Runtime.Tool, m.Runtime.Endpoint, werr.Message)
	}
	return crash("tool %q of %s gave no result: %v", m.Runtime.Tool, m.Runtime.Endpoint, err)
}

// mcpResult reads a tools/call result as the profile defines it.
func mcpResult(res *toolResult) gateway.RunResult {
	units, uerr := metaValue(res.Meta.Units)
	quote, qerr := metaValue(res.Meta.Quote)
	out := gateway.RunResult{Outcome: contract.Outcome{Units: units, Quote: quote}}
	if err := cmp.Or(uerr, qerr); err != nil {
		// A number beyond a double: the answer is not I-JSON, refused whole.
		out.Outcome.Kind, out.Message = contract.OutcomeCrash, "the result's _meta is not I-JSON: "+err.Error()
		return out
	}
	text, hasText := firstText(res)
	structured := res.StructuredContent
	if string(structured) == "null" {
		structured = nil
	}
	if res.IsError {
		code, msg := structuredError(structured)
		if msg == "" {
			msg = text
		}
		out.Message = msg
		if code == "" {
			out.Outcome.Kind = contract.OutcomeCrash
			if out.Message == "" {
				out.Message = "the tool failed (isError) without an error code"
			}
			return out
		}
		out.Outcome.Kind, out.Outcome.Code = contract.OutcomeError, code
		return out
	}
	if len(res.InputRequests) > 0 {
		out.Outcome.Kind, out.Message = contract.OutcomeCrash, "the tool asked for more input, which the agent profile does not provide"
		return out
	}
	switch {
	case structured != nil:
		// structuredContent is passed on as the tool wrote it (its
		// digits kept), or as its text block writes it when the tool also
		// returns it serialized there, as MCP advises.
		t := []byte(strings.TrimSpace(text))
		switch {
		case hasText && bytes.Equal(t, structured):
			out.Output = t
		case hasText && sameJSON(t, structured):
			out.Output = t
		default:
			var b bytes.Buffer
			if err := json.Compact(&b, structured); err != nil {
				out.Outcome.Kind, out.Message = contract.OutcomeCrash, "structuredContent is not JSON: "+err.Error()
				return out
			}
			out.Output = b.Bytes()
		}
	case hasText:
		t := strings.TrimSpace(text)
		if !json.Valid([]byte(t)) {
			out.Outcome.Kind, out.Message = contract.OutcomeCrash, "no structuredContent, and the first text block is not JSON"
			return out
		}
		out.Output = json.RawMessage(t)
	default:
		out.Outcome.Kind, out.Message = contract.OutcomeCrash, "the result has neither structuredContent nor a text block"
		return out
	}
	out.Outcome.Kind = contract.OutcomeOutput
	return out
}

// metaValue decodes a value of the result's _meta (numbers as float64s),
// nil when absent.
func metaValue(raw json.RawMessage) (any, error) {
	var v any
	if len(raw) == 0 {
		return nil, nil
	}
	err := json.Unmarshal(raw, &v)
	return v, err
}

func firstText(res *toolResult) (string, bool) {
	for _, c := range res.Content {
		if c.Type == "text" {
			return c.Text, true
		}
	}
	return "", false
}

// structuredError reads structuredContent.error.{code,message}.
func structuredError(raw json.RawMessage) (code, message string) {
	var sc any
	if len(raw) == 0 || json.Unmarshal(raw, &sc) != nil {
		return "", ""
	}
	obj, ok := sc.(map[string]any)
	if !ok {
		return "", ""
	}
	e, ok := obj["error"].(map[string]any)
	if !ok {
		return "", ""
	}
	code, _ = e["code"].(string)
	message, _ = e["message"].(string)
	return code, message
}

// sameJSON reports whether two JSON documents decode to the same value.
func sameJSON(a, b []byte) bool {
	var va, vb any
	if json.Unmarshal(a, &va) != nil || json.Unmarshal(b, &vb) != nil {
		return false
	}
	return reflect.DeepEqual(va, vb)
}
