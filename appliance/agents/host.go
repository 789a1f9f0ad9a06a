package agents

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"holon.dev/holon/gateway"
	"holon.dev/holon/gateway/contract"
	"holon.dev/holon/journal"
)

// Host serves agents compiled into the binary over one MCP Streamable HTTP
// endpoint, following the Holon MCP agent profile (gateway.md §6), so that
// another gateway can register them as mcp agents (`holon agents serve`):
// each agent is a tool named after it; the arguments are its input; its
// output is the result's structuredContent (and a text block); a declared
// error is isError with structuredContent.error.code; units and quotes go in
// the result's _meta; the caller's holon/max_cost reaches the agent's
// ctx.MaxCost; and an orchestrator delegates through the
// holon/delegation grant it is given.
type Host struct {
	server  *mcp.Server
	handler http.Handler
	tools   []string
}

// HostConfig is what a Host serves, and how.
type HostConfig struct {
	// Manifests are the agents to serve: dev agents whose handlers Runtime has.
	Manifests []*contract.Manifest
	// Runtime runs them.
	Runtime *gateway.DevRuntime
	// Client makes the orchestrators' delegated calls (http.DefaultClient
	// when nil).
	Client *http.Client
	// Gateways, when set, are the only origins a delegation url may point
	// to; otherwise any http(s) url is accepted (the host then posts the
	// token wherever its caller says).
	Gateways []string
	// Logger receives internal errors.
	Logger *slog.Logger
}

// NewHost builds the host of cfg's agents.
func NewHost(cfg HostConfig) (*Host, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	h := &Host{server: mcp.NewServer(&mcp.Implementation{Name: "holon-agents", Version: "v0"}, &mcp.ServerOptions{Logger: cfg.Logger})}
	seen := map[string]string{}
	for _, m := range cfg.Manifests {
		name := m.Name()
		if m.Runtime.Kind != contract.RuntimeDev || !cfg.Runtime.Has(gateway.DevHandlerName(m)) {
			return nil, fmt.Errorf("agent host: %s is not an agent compiled into this binary", m.Ref())
		}
		if other, dup := seen[name]; dup {
			return nil, fmt.Errorf("agent host: %s and %s would both be the tool %q", other, m.Ref(), name)
		}
		seen[name] = m.Ref()
		schema, ok := m.Interface.Input.(map[string]any)
		if !ok || schema["type"] != "object" {
			return nil, fmt.Errorf("agent host: %s: an MCP tool's input must be an object schema", m.Ref())
		}
		h.server.AddTool(&mcp.Tool{Name: name, Title: m.ID, Description: m.Summary, InputSchema: schema}, hostTool(m, cfg))
		h.tools = append(h.tools, name)
	}
	h.handler = mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return h.server }, nil)
	return h, nil
}

// Tools lists the tools served, one per agent.
func (h *Host) Tools() []string { return append([]string(nil), h.tools...) }

// ServeHTTP serves the MCP endpoint (stateful sessions, so that a caller's
// cancellation reaches the running agent).
func (h *Host) ServeHTTP(w http.ResponseWriter, r *http.Request) { h.handler.ServeHTTP(w, r) }

// hostTool runs one agent for one tools/call.
func hostTool(m *contract.Manifest, cfg HostConfig) mcp.ToolHandler {
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		input := json.RawMessage(req.Params.Arguments)
		if len(input) == 0 {
			input = json.RawMessage("{}")
		}
		if err := m.InputSchema().ValidateJSON(input); err != nil {
			return failure(fmt.Sprintf("the arguments do not match %s's interface.input: %v", m.Ref(), err)), nil
		}
		inv := &gateway.Invocation{Manifest: m, Input: input}
		meta := req.Params.GetMeta()
		if raw, ok := meta["holon/max_cost"]; ok {
			mc, err := readMaxCost(m, raw)
			if err != nil {
				return failure(err.Error()), nil
			}
			inv.MaxCost = &mc
		}
		if raw, ok := meta["holon/files"]; ok {
			files, err := readFiles(raw, cfg.Client, cfg.Gateways)
			if err != nil {
				return failure(err.Error()), nil
			}
			inv.Files = files
		}
		if len(m.Calls) > 0 {
			if raw, ok := meta["holon/delegation"]; ok {
				grant, err := readGrant(raw, cfg.Gateways)
				if err != nil {
					return failure(err.Error()), nil
				}
				inv.Delegate = &RemoteDelegator{Grant: grant, Client: cfg.Client}
			}
		}
		return toolResult(cfg.Runtime.Run(ctx, inv)), nil
	}
}

// readMaxCost reads _meta["holon/max_cost"] = {amount, currency}.
func readMaxCost(m *contract.Manifest, raw any) (journal.Amount, error) {
	var mc struct {
		Amount   string `json:"amount"`
		Currency string `json:"currency"`
	}
	b, _ := json.Marshal(raw)
	if err := json.Unmarshal(b, &mc); err != nil {
		return 0, fmt.Errorf("holon/max_cost is not {amount, currency}: %s", b)
	}
	a, err := journal.ParseAmount(mc.Amount)
	if err != nil {
		return 0, fmt.Errorf("holon/max_cost.amount: %v", err)
	}
	if mc.Currency != m.Currency() {
		return 0, fmt.Errorf("holon/max_cost is in %q, and %s prices in %q", mc.Currency, m.Ref(), m.Currency())
	}
	return a, nil
}

// readGrant reads _meta["holon/delegation"] = {url, token, expires}.
func readGrant(raw any, gateways []string) (gateway.DelegationGrant, error) {
	var g gateway.DelegationGrant
	b, _ := json.Marshal(raw)
	if err := json.Unmarshal(b, &g); err != nil || g.URL == "" || g.Token == "" {
		return g, fmt.Errorf("holon/delegation is not {url, token, expires}: %s", b)
	}
	if !strings.HasPrefix(g.URL, "https://") && !strings.HasPrefix(g.URL, "http://") {
		return g, fmt.Errorf("holon/delegation.url %q is not an http(s) url", g.URL)
	}
	if len(gateways) == 0 {
		return g, nil
	}
	for _, origin := range gateways {
		if g.URL == strings.TrimRight(origin, "/")+"/v0/calls" {
			return g, nil
		}
	}
	return g, fmt.Errorf("holon/delegation.url %q is not at a gateway this host serves (--gateway)", g.URL)
}

// readFiles reads _meta["holon/files"] = {handle: {url, content_type,
// size, sha256, expires}}: each link is fetched over HTTP by the agent's
// ctx.Download, which checks size and SHA-256. With gateways set, a link
// must be at one of them, as a delegation url must: the host fetches no
// address its caller makes up.
func readFiles(raw any, client *http.Client, gateways []string) (map[string]gateway.FileLink, error) {
	if client == nil {
		client = http.DefaultClient
	}
	var links map[string]gateway.FileLink
	b, _ := json.Marshal(raw)
	if err := json.Unmarshal(b, &links); err != nil {
		return nil, fmt.Errorf("holon/files is not {handle: {url, content_type, size, sha256, expires}}: %s", b)
	}
	for h, l := range links {
		if !strings.HasPrefix(l.URL, "https://") && !strings.HasPrefix(l.URL, "http://") {
			return nil, fmt.Errorf("holon/files[%q].url %q is not an http(s) url", h, l.URL)
		}
		if !atGateway(l.URL, gateways) {
			return nil, fmt.Errorf("holon/files[%q].url %q is not at a gateway this host serves (--gateway)", h, l.URL)
		}
		l.Open = func(ctx context.Context) (io.ReadCloser, error) { return fetch(ctx, client, l.URL) }
		links[h] = l
	}
	return links, nil
}

// atGateway reports whether a file link is under one of the gateways'
// origins (any, when none is set).
func atGateway(url string, gateways []string) bool {
	if len(gateways) == 0 {
		return true
	}
	for _, origin := range gateways {
		if strings.HasPrefix(url, strings.TrimRight(origin, "/")+"/v0/files/") {
			return true
		}
	}
	return false
}

// fetch GETs a file link; any answer but 200 is a failed download.
func fetch(ctx context.Context, client *http.Client, url string) (io.ReadCloser, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		resp.Body.Close()
		return nil, fmt.Errorf("the link answered %d %s", resp.StatusCode, http.StatusText(resp.StatusCode))
	}
	return resp.Body, nil
}

// failure is a tool failure without a code: agent_error at the gateway.
func failure(msg string) *mcp.CallToolResult {
	return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: msg}}}
}

// toolResult writes a run's result as the profile reads it.
func toolResult(res gateway.RunResult) *mcp.CallToolResult {
	var meta mcp.Meta
	if res.Outcome.Units != nil || res.Outcome.Quote != nil {
		meta = mcp.Meta{}
		if res.Outcome.Units != nil {
			meta["holon/units"] = res.Outcome.Units
		}
		if res.Outcome.Quote != nil {
			meta["holon/quote"] = res.Outcome.Quote
		}
	}
	switch res.Outcome.Kind {
	case contract.OutcomeOutput:
		return &mcp.CallToolResult{Meta: meta, StructuredContent: res.Output,
			Content: []mcp.Content{&mcp.TextContent{Text: string(res.Output)}}}
	case contract.OutcomeError:
		return &mcp.CallToolResult{Meta: meta, IsError: true,
			StructuredContent: map[string]any{"error": map[string]string{"code": res.Outcome.Code, "message": res.Message}},
			Content:           []mcp.Content{&mcp.TextContent{Text: res.Outcome.Code + ": " + res.Message}}}
	case contract.OutcomeTimeout:
		return failure("the run was cancelled")
	}
	msg := res.Message
	if msg == "" {
		msg = "the agent failed"
	}
	f := failure(msg)
	f.Meta = meta
	return f
}

// RemoteManifest is m as an mcp agent of a host at endpoint: the same
// manifest, with runtime {kind: mcp, endpoint, tool: <agent name>} and the
// same limits. A gateway lists these to run the host's agents remotely.
func RemoteManifest(m *contract.Manifest, endpoint string) (*contract.Manifest, error) {
	b, err := json.Marshal(m)
	if err != nil {
		return nil, err
	}
	var doc map[string]any
	if err := json.Unmarshal(b, &doc); err != nil {
		return nil, err
	}
	rt := map[string]any{"kind": contract.RuntimeMCP, "endpoint": endpoint, "tool": m.Name()}
	if m.Runtime.Limits != nil {
		rt["limits"] = m.Runtime.Limits
	}
	doc["runtime"] = rt
	if b, err = json.Marshal(doc); err != nil {
		return nil, err
	}
	return contract.ParseManifest(b)
}
