package mcpserver

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"net/http"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"holon.dev/holon"
	"holon.dev/holon/gateway"
)

// Two revisions of MCP on the same /mcp. A client that asks for 2025-11-25
// (or older) gets a stateful session, as before; a client of 2026-07-28
// (which sends its revision in the MCP-Protocol-Version header of every
// request) is served statelessly: no session, no initialize
// (server/discover), each request authenticated and answered on its own.
// Every tool is the same in both.
//
// Approvals in the client differ by revision. In 2025-11-25 the server
// asks the client (an elicitation request) while the call waits. In
// 2026-07-28 there are no server-to-client requests: call_agent answers
// a held call with an input request (the same approval form) and a
// request state naming the approval; the client shows the form and sends
// call_agent again with the answer and the state, and that answer decides
// the approval exactly as the form's answer does in 2025-11-25. The state
// is sealed for the key (or dev mandate) that made the call, so a client
// cannot point it at another approval, with a key every gateway of the
// store shares (New's stateKey: derived from HOLON_FILE_SECRET, else made
// once and kept in the store), so that the answer may reach any gateway
// behind the same name, and a restart between the two round trips
// changes nothing. Setting or changing HOLON_FILE_SECRET refuses the
// states sealed before; their approvals stay pending, decided as any
// other.

// mcpStatelessRevision is the first revision /mcp serves statelessly.
const mcpStatelessRevision = "2026-07-28"

// approvalInputID names the approval form among a result's input requests.
const approvalInputID = "approval"

// statelessRequest reports whether a request to /mcp speaks a revision
// served statelessly.
func statelessRequest(r *http.Request) bool {
	return r.Header.Get("MCP-Protocol-Version") >= mcpStatelessRevision
}

// multiRoundTrip reports whether the client of a request takes input
// requests in results (2026-07-28) rather than server-to-client requests.
func multiRoundTrip(ss *mcp.ServerSession) bool {
	p := ss.InitializeParams()
	return p != nil && p.ProtocolVersion >= mcpStatelessRevision
}

// approvalInput is call_agent's answer for a held call in 2026-07-28: the
// approval form as an input request, and the sealed state to send back.
func (m *Server) approvalInput(held *gateway.CallResult, c *mcpCaller) *mcp.CallToolResult {
	ap := held.Approval
	st, err := m.engine.Mandate(ap.Mandate)
	if err != nil {
		return m.fail("call_agent", err)
	}
	return &mcp.CallToolResult{
		InputRequests: mcp.InputRequestMap{approvalInputID: &mcp.ElicitParams{
			Mode: "form", Message: approvalMessage(ap, st.Mandate), RequestedSchema: approvalForm,
		}},
		RequestState: m.sealState(ap.ID, c.owner),
	}
}

// approvalAnswered is call_agent sent again with the approval form's
// answer: it decides the approval the state names, as the form's answer
// does in 2025-11-25. The held call runs (once) with its own input.
func (m *Server) approvalAnswered(ctx context.Context, req *mcp.CallToolRequest, c *mcpCaller) *mcp.CallToolResult {
	id, ok := m.openState(req.Params.RequestState, c.owner)
	if !ok {
		return toolError(holon.Errorf(holon.CodeInvalidRequest, "requestState is not one this gateway gave this key: send call_agent again without it"), nil)
	}
	ans, ok := req.Params.InputResponses[approvalInputID].(*mcp.ElicitResult)
	if !ok {
		return toolError(holon.Errorf(holon.CodeInvalidRequest, "inputResponses.%s, the answer to the approval form, is missing", approvalInputID), nil)
	}
	ap, err := m.approval(ctx, c, id)
	if err != nil {
		return m.fail("call_agent", err)
	}
	rcpt, err := m.engine.Receipt(ap.Receipt)
	if err != nil {
		return m.fail("call_agent", err)
	}
	return m.decideAnswer(ctx, &gateway.CallResult{Receipt: rcpt, Approval: ap}, ans)
}

// sealState is an approval id with its seal for the caller.
func (m *Server) sealState(id, owner string) string {
	return id + "." + m.seal(id, owner)
}

// openState is the approval id of a state sealed for owner (by this
// gateway or another of the store).
func (m *Server) openState(state, owner string) (string, bool) {
	i := strings.LastIndexByte(state, '.')
	if i <= 0 {
		return "", false
	}
	id, sum := state[:i], state[i+1:]
	if !hmac.Equal([]byte(sum), []byte(m.seal(id, owner))) {
		return "", false
	}
	return id, true
}

func (m *Server) seal(id, owner string) string {
	h := hmac.New(sha256.New, m.stateKey)
	h.Write([]byte(owner))
	h.Write([]byte{0})
	h.Write([]byte(id))
	return base64.RawURLEncoding.EncodeToString(h.Sum(nil))
}
