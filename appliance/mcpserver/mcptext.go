package mcpserver

import (
	"bytes"
	"encoding/json"
	"strings"
)

// Untrusted text on /mcp (mcp.md "Untrusted text", gateway.md §7 "Limits
// and platform rules"). What an agent produced at run time (its output,
// its error messages) reaches the client inside
//
//	<agent-output agent="ns/name@1.2.0">…</agent-output>
//
// and what an author wrote in a manifest (summary, description, the
// interface with its schemas, examples and error descriptions) inside
//
//	<agent-text agent="ns/name@1.2.0">…</agent-text>
//
// Inside a wrapper every "<" is written \u003c, so no text can close the
// wrapper around it, or open a tag of its own, and pose as the gateway.
// JSON inside a wrapper stays JSON: \u003c is its own escape for "<", so
// the inside parses back to exactly the original value.
const (
	tagOutput = "agent-output"
	tagText   = "agent-text"
)

// escapeLT writes every "<" of s as \u003c. It is applied to every text
// that reaches an MCP client and is not the gateway's own markup, wrapped
// or not (error codes an agent chose, free-text manifest fields).
func escapeLT(s string) string {
	return strings.ReplaceAll(s, "<", `\u003c`)
}

// attrEscaper makes a value safe inside a double-quoted attribute.
var attrEscaper = strings.NewReplacer(`&`, "&amp;", `"`, "&quot;", `<`, "&lt;", `>`, "&gt;")

// wrapText wraps a text from an agent or its author in tag, "<" escaped.
func wrapText(tag, agent, text string) string {
	return "<" + tag + ` agent="` + attrEscaper.Replace(agent) + `">` + escapeLT(text) + "</" + tag + ">"
}

// wrapJSON wraps a JSON document from an agent or its author in tag. The
// document is re-encoded with "<", ">" and "&" inside its strings written
// \u003c, \u003e and \u0026 (JSON outside strings has no "<"), so it stays
// valid JSON with the same value.
func wrapJSON(tag, agent string, doc []byte) string {
	var b bytes.Buffer
	if err := json.Compact(&b, doc); err != nil {
		// Not JSON (it always is: outputs and manifests are validated);
		// wrap it as text rather than lose the wrapper.
		return wrapText(tag, agent, string(doc))
	}
	var esc bytes.Buffer
	json.HTMLEscape(&esc, b.Bytes())
	return "<" + tag + ` agent="` + attrEscaper.Replace(agent) + `">` + esc.String() + "</" + tag + ">"
}

// wrapValue wraps any JSON-encodable value as wrapJSON does.
func wrapValue(tag, agent string, v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return wrapText(tag, agent, "")
	}
	return wrapJSON(tag, agent, b)
}
