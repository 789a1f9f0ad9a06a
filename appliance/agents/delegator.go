package agents

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"

	"holon.dev/holon"
	"holon.dev/holon/gateway"
	"holon.dev/holon/journal"
)

// RemoteDelegator makes an orchestrator's downstream calls from outside the
// gateway: POST <grant url> with the grant's token, as a remote agent does
// with the _meta["holon/delegation"] it was given. The gateway applies the
// run's sub-mandate and every rule of gateway.md §3.
type RemoteDelegator struct {
	// Grant is the run's delegation grant.
	Grant gateway.DelegationGrant
	// Client makes the requests (http.DefaultClient when nil).
	Client *http.Client
}

// maxCallAnswer bounds the gateway's answer to one delegated call.
const maxCallAnswer = 16 << 20

// delegatedRequest is the body of a delegated POST /v0/calls.
type delegatedRequest struct {
	Agent      string          `json:"agent,omitempty"`
	Capability string          `json:"capability,omitempty"`
	Input      json.RawMessage `json:"input"`
	MaxCost    *journal.Amount `json:"max_cost,omitempty"`
}

// callAnswer is the gateway's answer to POST /v0/calls.
type callAnswer struct {
	Output  json.RawMessage `json:"output"`
	Receipt *struct {
		ID     string  `json:"id"`
		Status string  `json:"status"`
		Error  *string `json:"error"`
	} `json:"receipt"`
	Error *struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// Call implements gateway.Delegator over HTTP.
func (d *RemoteDelegator) Call(ctx context.Context, t gateway.Target, input json.RawMessage) gateway.CallOutcome {
	failed := func(format string, args ...any) gateway.CallOutcome {
		return gateway.CallOutcome{Status: holon.StatusFailed, Error: holon.CodeGatewayError, Message: fmt.Sprintf(format, args...)}
	}
	body, err := json.Marshal(delegatedRequest{Agent: t.Agent, Capability: t.Capability, Input: input, MaxCost: t.MaxCost})
	if err != nil {
		return failed("encode the delegated call: %v", err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, d.Grant.URL, bytes.NewReader(body))
	if err != nil {
		return failed("delegation url: %v", err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+d.Grant.Token)
	client := d.Client
	if client == nil {
		client = http.DefaultClient
	}
	resp, err := client.Do(req)
	if err != nil {
		return failed("delegated call to %s: %v", d.Grant.URL, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxCallAnswer+1))
	if err != nil || len(raw) > maxCallAnswer {
		return failed("reading the gateway's answer: %v", err)
	}
	var ans callAnswer
	if err := json.Unmarshal(raw, &ans); err != nil {
		return failed("the gateway answered %d with a body that is not JSON", resp.StatusCode)
	}
	out := gateway.CallOutcome{}
	if ans.Error != nil {
		out.Error, out.Message = ans.Error.Code, ans.Error.Message
	}
	if ans.Receipt == nil {
		// Refused before any receipt: a dead token, a malformed call.
		out.Status = holon.StatusDenied
		if out.Error == "" {
			out.Status, out.Error = holon.StatusFailed, holon.CodeGatewayError
			out.Message = fmt.Sprintf("the gateway answered %d without a receipt", resp.StatusCode)
		}
		return out
	}
	out.Receipt, out.Status = ans.Receipt.ID, ans.Receipt.Status
	if ans.Receipt.Error != nil {
		out.Error = *ans.Receipt.Error
	}
	out.OK = out.Status == holon.StatusSucceeded
	if out.OK {
		out.Output = ans.Output
	}
	return out
}
