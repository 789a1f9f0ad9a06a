// Package auth is who sends a request: the principal (a human or agent
// key, the operator's admin key, nobody, or everyone on a dev gateway),
// what each route lets in, and the chain of verifiers that finds the
// principal of a bearer credential. Each room that issues credentials
// registers its own verifier (account keys, OAuth access tokens, the
// admin key); the console's sessions hand their principal in with the
// request (WithPrincipal).
//
// It may import the domain (holon), token and web; no other room.
package auth
