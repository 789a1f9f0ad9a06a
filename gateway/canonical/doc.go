// Package canonical is Holon's strict reader of JSON and its RFC 8785
// encoder. Check and Decode accept only I-JSON (RFC 7493) with field names
// spelt exactly; JSON writes a value in the JSON Canonicalization Scheme
// and Hash is the SHA-256 of that form, as approvals and Idempotency-Keys
// bind an input by it.
//
// It is self-contained: it imports the standard library only, nothing of
// the project. Its errors are plain *Error values with a byte offset; the
// gateway turns them into coded invalid_request errors
// (gateway.CheckJSON, gateway.DecodeJSON).
package canonical
