// Package holon is the centre of the gateway: the records a call leaves
// behind (receipts, holds, approvals, events, journal rows, accounts,
// budgets, documents) and the store interface the engine runs on.
//
// It imports nothing of the project but journal, the money. The engine
// (package gateway) works on these types and this interface; package kv
// implements the interface on bbolt; the hosted product (appliance), the
// console (webui) and the binary (cmd/holon) use the engine and these
// types, never kv.
package holon
