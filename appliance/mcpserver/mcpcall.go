package mcpserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"holon.dev/holon"
	"holon.dev/holon/gateway"
	"holon.dev/holon/gateway/contract"
	"holon.dev/holon/journal"
)

// CodeApprovalRejected: the human rejected the call in the client's
// approval form; it did not run.
const CodeApprovalRejected = "approval_rejected"

// callArgs are call_agent's arguments: POST /v0/calls without the mandate,
// which is the key's.
type callArgs struct {
	Agent      string          `json:"agent"`
	Capability string          `json:"capability"`
	Input      json.RawMessage `json:"input"`
	MaxCost    string          `json:"max_cost"`
	Approval   string          `json:"approval"`
}

// callAnswerMCP is call_agent's answer when the call succeeded or waits
// for an approval.
type callAnswerMCP struct {
	Status   string         `json:"status"`
	Agent    string         `json:"agent,omitempty"`
	Output   string         `json:"output,omitempty"`
	Receipt  *holon.Receipt `json:"receipt"`
	Approval *approvalView  `json:"approval,omitempty"`
	Message  string         `json:"message,omitempty"`
	Alerts   []*holon.Alert `json:"alerts,omitempty"`
}

// callAgent runs a call through engine.Call exactly as POST /v0/calls does
// for the key, and when the call is held for approval asks the human in
// the client (attended key, client with elicitation) or answers
// pending_approval.
func (m *Server) callAgent(ctx context.Context, req *mcp.CallToolRequest, c *mcpCaller, args json.RawMessage) *mcp.CallToolResult {
	if req.Params.RequestState != "" || len(req.Params.InputResponses) > 0 {
		// 2026-07-28: the approval form's answer (mcp_revisions.go).
		return m.approvalAnswered(ctx, req, c)
	}
	var in callArgs
	if err := decodeArgs(args, &in); err != nil {
		return toolError(err, nil)
	}
	if (in.Agent == "") == (in.Capability == "") {
		return toolError(holon.Errorf(holon.CodeInvalidRequest, "name exactly one of agent and capability"), nil)
	}
	ci := gateway.CallInput{Mandate: c.mandate, Agent: in.Agent, Capability: in.Capability, Input: in.Input, Approval: in.Approval, Key: c.keyPrefix}
	if in.MaxCost != "" {
		amt, err := journal.ParseAmount(in.MaxCost)
		if err != nil {
			return toolError(holon.Errorf(holon.CodeInvalidRequest, "max_cost: %v", err), nil)
		}
		ci.MaxCost = &amt
	}
	if in.Approval != "" {
		// An approval out of scope is as unknown as one that never was.
		if _, err := m.approval(ctx, c, in.Approval); err != nil {
			return m.fail("call_agent", err)
		}
	}
	res, err := m.engine.Call(ctx, ci)
	if err != nil {
		return m.fail("call_agent", err)
	}
	if res.Receipt.Status != holon.StatusPendingApproval || res.Approval == nil {
		return callResult(res, nil)
	}
	if !c.attended || !canElicit(req.Session) {
		why := "this key does not ask in the client (ask_in_client is off)"
		if c.attended {
			why = "this client cannot show approval forms (it did not declare elicitation)"
		}
		return pending(res, why)
	}
	if multiRoundTrip(req.Session) {
		return m.approvalInput(res, c)
	}
	return m.askHuman(ctx, req, res)
}

// canElicit reports whether the client declared form elicitation.
func canElicit(ss *mcp.ServerSession) bool {
	p := ss.InitializeParams()
	if p == nil || p.Capabilities == nil || p.Capabilities.Elicitation == nil {
		return false
	}
	e := p.Capabilities.Elicitation
	return e.Form != nil || e.URL == nil
}

// askHuman shows the human the approval form of a held call and decides
// the approval with the answer, as POST /v0/approvals/{id} would:
// approve runs the call, reject (or decline) rejects it, and a form left
// unanswered (cancelled, timed out, the session or the gateway ending)
// leaves it pending.
func (m *Server) askHuman(ctx context.Context, req *mcp.CallToolRequest, held *gateway.CallResult) *mcp.CallToolResult {
	ap := held.Approval
	st, err := m.engine.Mandate(ap.Mandate)
	if err != nil {
		return m.fail("call_agent", err)
	}
	ectx, cancel := context.WithTimeout(ctx, mcpElicitTimeout)
	defer cancel()
	stop := context.AfterFunc(m.sessionContext(req.Session.ID()), cancel)
	defer stop()
	ans, err := req.Session.Elicit(ectx, &mcp.ElicitParams{
		Mode:            "form",
		Message:         approvalMessage(ap, st.Mandate),
		RequestedSchema: approvalForm,
	})
	if err != nil {
		return pending(held, fmt.Sprintf("the approval form got no answer (%s)", escapeLT(err.Error())))
	}
	return m.decideAnswer(ctx, held, ans)
}

// decideAnswer decides a held call's approval with the approval form's
// answer, as POST /v0/approvals/{id} would: approve runs the call, reject
// (or decline) rejects it, and a form closed without deciding leaves it
// pending.
func (m *Server) decideAnswer(ctx context.Context, held *gateway.CallResult, ans *mcp.ElicitResult) *mcp.CallToolResult {
	ap := held.Approval
	decision, _ := ans.Content["decision"].(string)
	var d gateway.ApprovalDecision
	switch {
	case ans.Action == "accept" && decision == "approve":
	case ans.Action == "accept" && decision == "reject", ans.Action == "decline":
		d.Reject = true
	default:
		return pending(held, "the human closed the approval form without deciding")
	}
	decided, res, err := m.engine.Decide(context.WithoutCancel(ctx), ap.ID, d)
	if err != nil {
		// Decided elsewhere meanwhile (POST /v0/approvals): say how it stands.
		extra := &mcpError{Agent: ap.Agent, Receipt: escapeReceipt(held.Receipt), Approval: viewApproval(decided)}
		var ge *holon.Error
		if !errors.As(err, &ge) {
			m.log.Error("mcp: decide an approval", "approval", ap.ID, "err", err)
			return toolError(holon.Errorf(holon.CodeGatewayError, "internal error"), extra)
		}
		return toolError(&holon.Error{Code: ge.Code, Msg: escapeLT(ge.Msg)}, extra)
	}
	if d.Reject {
		return toolError(holon.Errorf(CodeApprovalRejected, "the human rejected this call in the approval form (approval %s): it did not run and nothing was billed; do not send it again without asking the user", ap.ID),
			&mcpError{Agent: ap.Agent, Receipt: escapeReceipt(held.Receipt), Approval: viewApproval(decided)})
	}
	return callResult(res, decided)
}

// approvalMessage is the approval form's text: only what the gateway
// knows for sure (no author-written text, which could misdescribe the
// call to the human).
func approvalMessage(ap *holon.Approval, md *contract.Mandate) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Your assistant wants to call an agent, and your mandate %s asks you first.\n\n", md.ID)
	fmt.Fprintf(&b, "Agent: %s\n", ap.Agent)
	if ap.Capability != "" {
		fmt.Fprintf(&b, "Asked for: the capability %s\n", ap.Capability)
	}
	fmt.Fprintf(&b, "Worst case: %s %s (the most this call can cost; it is billed only what it uses, and only if it succeeds)\n", ap.WorstCase, ap.Currency)
	if md.Approval != nil && md.Approval.Above != nil {
		fmt.Fprintf(&b, "Mandate: %s, which asks for approval above %s %s\n", md.ID, md.Approval.Above, md.Currency)
	} else {
		fmt.Fprintf(&b, "Mandate: %s\n", md.ID)
	}
	fmt.Fprintf(&b, "\nApprove to run it now, or reject it (approval %s).", ap.ID)
	return b.String()
}

// pending is the answer for a call held for a human's approval.
func pending(res *gateway.CallResult, why string) *mcp.CallToolResult {
	ap := res.Approval
	return toolAnswer(callAnswerMCP{
		Status:   holon.StatusPendingApproval,
		Agent:    ap.Agent,
		Receipt:  escapeReceipt(res.Receipt),
		Approval: viewApproval(ap),
		Message: fmt.Sprintf("this call needs a human's approval: its worst case is %s %s, and %s. Approval %s is pending: tell the user it waits for their decision (with their human key: POST /v0/approvals/%s); check it with get_approval, and once it is granted call call_agent again with the same arguments and approval: %q",
			ap.WorstCase, ap.Currency, why, ap.ID, ap.ID, ap.ID),
	})
}

// callResult turns a call's outcome into call_agent's answer: the output
// wrapped on success, else a tool error with the receipt's code.
func callResult(res *gateway.CallResult, decided *holon.Approval) *mcp.CallToolResult {
	r := escapeReceipt(res.Receipt)
	agent := ""
	if r.Agent != nil {
		agent = *r.Agent
	}
	if r.Status == holon.StatusSucceeded {
		out := res.Output
		if len(out) == 0 {
			out = json.RawMessage("null")
		}
		return toolAnswer(callAnswerMCP{Status: r.Status, Agent: agent, Output: wrapJSON(tagOutput, agent, out),
			Receipt: r, Approval: viewApproval(decided), Alerts: res.Alerts})
	}
	code := holon.CodeGatewayError
	if r.Error != nil {
		code = *r.Error
	}
	msg := res.Message
	switch {
	case r.Status == holon.StatusFailed && msg != "":
		// A failed run's message is the agent's words, or the gateway's
		// quoting them (an endpoint's error, an invalid output).
		msg = wrapText(tagOutput, agent, msg)
	case msg == "":
		msg = fmt.Sprintf("the call ended %s with %s", r.Status, code)
	default:
		msg = escapeLT(msg)
	}
	return toolError(&holon.Error{Code: code, Msg: msg}, &mcpError{Agent: agent, Receipt: r, Approval: viewApproval(decided)})
}
