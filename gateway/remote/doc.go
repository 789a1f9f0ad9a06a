// Package remote holds the runtimes that run agents over the network: the
// MCP runner (MCPRunner, with its session pool) and the webhook runner
// (WebhookRunner), and the guarded HTTP client they share (Config,
// NetGuard): size and time limits, redirects refused, and no dial to a
// private, loopback or otherwise internal address unless allowed
// (spec/gateway.md §7).
//
// The runners meet the engine through gateway.Runner, gateway.Invocation
// and gateway.RunResult, which the engine defines: remote imports the
// engine (package gateway) and the contracts, never the reverse, and the
// wiring (appliance) hands the runners to gateway.New. It imports nothing
// of the project's storage.
package remote
