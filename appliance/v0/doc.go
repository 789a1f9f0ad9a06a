// Package v0 is the room of the HTTP API's own routes (the /v0 endpoints
// of the engine): calls (and delegated calls), approvals, receipts and
// their filters, mandates, balances, the health check and the operator's
// live backup. Each endpoint authenticates and scopes through
// appliance/auth's Mount; the other rooms (accounts, publishing, files,
// the catalogue with the agents' listing, the MCP server, sign-in, OAuth,
// the console) register their own routes on the same Mount.
//
// It may import, of the project: the domain (holon), journal, gateway,
// and the rooms appliance/token, appliance/web, appliance/auth,
// appliance/wire and appliance/idempotency. A human's root mandates come
// from the accounts room through Config.Mandates; it never imports the
// composition root (appliance) nor another room that serves routes.
package v0
