// Package holon is the centre of the gateway: the records a call leaves
// behind (receipts, holds, approvals, events, journal rows, accounts,
// budgets, documents), the store interface the engine runs on, and the one
// error type every room returns: Error, a stable code (Code…) with a
// message and field errors. (The HTTP status of each code is the HTTP
// room's table, appliance/web: the domain knows nothing of HTTP.)
//
// It imports nothing of the project but journal, the money. The engine
// (package gateway) works on these types and this interface; package kv
// implements the interface on bbolt; the hosted product (appliance), the
// console (webui) and the binary (cmd/holon) use the engine and these
// types, never kv.
package holon
