// Package front is the gateway's front door: what every request goes
// through before its route, from outside or from a console page asking
// in-process. NUL characters in the path or query are refused, and a path
// or query that is not UTF-8 once decoded; a gateway without
// authentication (dev mode) answers only its own names (DNS rebinding);
// /mcp answers only its own origin; the body is bounded; and on a hosted
// gateway the client address's rate limit applies (before any key is
// looked up, and never again to a console page's own requests) and one
// line is logged per request: never a key, a query string, an input or an
// output. Delegated calls are handed to their hook after the checks and
// before the router.
//
// It may import, of the project: the domain (holon) and the rooms
// appliance/token, appliance/web, appliance/auth (the principal, for the
// log line), appliance/origin and appliance/ratelimit. The routes behind
// it, and the bodies that may be larger, are handed in by the
// composition root (Config).
package front
