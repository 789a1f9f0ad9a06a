// Package alerts is the room of budget alerts around the engine: the
// routes that list a mandate's alerts, an account's webhook (its URL and
// the signing secret the gateway makes for it, shown once), and the
// worker that delivers each alert to the webhook from the outbox the
// settlements fill (holon.BucketAlertOutbox), signed, retried with
// backoff for a stated time, through the network guard of remote agents.
// On a store several gateways share, the worker runs on one gateway at a
// time (the appliance leads it as a job).
//
// It imports the domain, the engine, the remote runtimes' network guard,
// the HTTP plumbing, the principal and the wire types; no room imports it.
package alerts
