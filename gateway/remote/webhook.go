package remote

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"

	"holon.dev/holon/gateway"
	"holon.dev/holon/gateway/contract"
)

// WebhookRunner runs agents of runtime.kind webhook (gateway.md §6): plain
// HTTP endpoints such as an n8n or Make workflow.
//
//	request   POST runtime.endpoint, body = the input as JSON
//	headers   x-holon-agent: ns/name@version, x-holon-call: <receipt id>,
//	          Authorization: Bearer <token> when the author set one,
//	          x-holon-delegation: {url, token, expires} when the agent declares calls,
//	          x-holon-files: {handle: {url, content_type, size, sha256, expires}}
//	          when the input names files (the links of _meta["holon/files"])
//	2xx       a JSON body: the output
//	any status with {"error": {"code", "message"}}: a failure, billed as declared
//	else      a non-2xx status or a body that is not JSON: agent_error
//
// Redirects are not followed, and an answer above the size limit is
// refused while it is read.
type WebhookRunner struct {
	cfg  Config
	http *remoteHTTP
}

// NewWebhookRunner returns the runner of webhook agents.
func NewWebhookRunner(cfg Config) *WebhookRunner {
	cfg = cfg.withDefaults()
	return &WebhookRunner{cfg: cfg, http: newRemoteHTTP(cfg)}
}

// Close closes idle connections.
func (r *WebhookRunner) Close() error {
	r.http.closeIdle()
	return nil
}

// WebhookFilesHeader carries a webhook agent's file links: the JSON object
// an MCP agent gets in _meta["holon/files"], by handle.
const WebhookFilesHeader = "x-holon-files"

// Run posts the input to the endpoint and reads the answer.
func (r *WebhookRunner) Run(ctx context.Context, inv *gateway.Invocation) gateway.RunResult {
	m := inv.Manifest
	probe := &callProbe{}
	req, err := http.NewRequestWithContext(withProbe(ctx, probe), http.MethodPost, m.Runtime.Endpoint, bytes.NewReader(inv.Input))
	if err != nil {
		return gateway.RunResult{Outcome: contract.Outcome{Kind: contract.OutcomeUnavailable}, Message: fmt.Sprintf("runtime.endpoint: %v", err)}
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	req.Header.Set("x-holon-agent", m.Ref())
	req.Header.Set("x-holon-call", inv.Receipt)
	if len(inv.Files) > 0 {
		b, _ := json.Marshal(inv.Files)
		req.Header.Set(WebhookFilesHeader, string(b))
	}
	if res, ok := grantFor(ctx, inv, func(g gateway.DelegationGrant) {
		b, _ := json.Marshal(g)
		req.Header.Set("x-holon-delegation", string(b))
	}); !ok {
		return res
	}
	token, _ := r.cfg.credential(m.ID)
	client := r.http.client(inv.Shipped, token)
	// A call is sent at most once: a request that failed after it was
	// written may have reached the agent, which may have acted on it, so it
	// is never sent again (the transport itself retries only a request
	// that was not written).
	resp, err := client.Do(req)
	if err != nil {
		st := probe.state()
		if st.stale {
			// The kept-alive connection was dead: the next call dials afresh.
			r.http.dropStale(inv.Shipped)
		}
		switch b, blocked := blockedAddress(err); {
		case ctx.Err() != nil:
			return gateway.RunResult{Outcome: contract.Outcome{Kind: contract.OutcomeTimeout}}
		case blocked:
			return gateway.RunResult{Outcome: contract.Outcome{Kind: contract.OutcomeUnavailable}, Message: b.Error()}
		case !st.sent:
			return gateway.RunResult{Outcome: contract.Outcome{Kind: contract.OutcomeUnavailable}, Message: fmt.Sprintf("cannot reach %s: %v", m.Runtime.Endpoint, err)}
		}
		return gateway.RunResult{Outcome: contract.Outcome{Kind: contract.OutcomeCrash}, Message: fmt.Sprintf("%s failed after the request was sent: %v", m.Runtime.Endpoint, err)}
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	switch {
	case ctx.Err() != nil:
		return gateway.RunResult{Outcome: contract.Outcome{Kind: contract.OutcomeTimeout}}
	case errors.Is(err, ErrResponseTooLarge):
		return gateway.RunResult{Outcome: contract.Outcome{Kind: contract.OutcomeCrash}, Message: fmt.Sprintf("the answer of %s is larger than %d bytes: refused", m.Ref(), r.cfg.MaxResponseBytes)}
	case err != nil:
		return gateway.RunResult{Outcome: contract.Outcome{Kind: contract.OutcomeCrash}, Message: fmt.Sprintf("reading the answer of %s: %v", m.Runtime.Endpoint, err)}
	}
	return webhookResult(resp, body)
}

// webhookResult reads a webhook's answer as the contract defines it.
func webhookResult(resp *http.Response, body []byte) gateway.RunResult {
	// An error whose code could be read two ways ({"code":"a","code":"b"})
	// is no declared error: it is read as any other answer (at 2xx an
	// output the engine fails as invalid_output, else agent_error), never
	// billed.
	if gateway.CheckJSON(body, "answer") == nil {
		if code, msg, ok := webhookError(body); ok {
			return gateway.RunResult{Outcome: contract.Outcome{Kind: contract.OutcomeError, Code: code}, Message: msg}
		}
	}
	crash := func(format string, args ...any) gateway.RunResult {
		return gateway.RunResult{Outcome: contract.Outcome{Kind: contract.OutcomeCrash}, Message: fmt.Sprintf(format, args...)}
	}
	switch s := resp.StatusCode; {
	case s >= 300 && s < 400:
		return crash("%s", redirectMessage(s, resp.Header.Get("Location")))
	case s < 200 || s >= 300:
		return crash("the endpoint answered %d %s", s, http.StatusText(s))
	case !json.Valid(body):
		return crash("the endpoint answered %d with a body that is not JSON", s)
	}
	return gateway.RunResult{Outcome: contract.Outcome{Kind: contract.OutcomeOutput}, Output: json.RawMessage(bytes.TrimSpace(body))}
}

// webhookError reads {"error": {"code", "message"}}: a failure whatever the
// status. An "error" that is not an object with a string code is not one.
func webhookError(body []byte) (code, message string, ok bool) {
	var v struct {
		Error *struct {
			Code    any `json:"code"`
			Message any `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal(body, &v) != nil || v.Error == nil {
		return "", "", false
	}
	code, isString := v.Error.Code.(string)
	if !isString || code == "" {
		return "", "", false
	}
	message, _ = v.Error.Message.(string)
	return code, message, true
}
