// Package oauth is the gateway's OAuth authorization server for /mcp
// (the MCP authorization protocol, revision 2025-11-25 and after): its
// metadata documents, dynamic client registration, clients described by
// their metadata documents, the consent page's backend, the token
// endpoint, and the verifier of the access tokens it issues. It
// registers its own routes and its own verifier (Server.Mount).
//
// A client that gets a 401 from /mcp finds the protected resource
// metadata (RFC 9728) named in WWW-Authenticate, then the authorization
// server metadata (RFC 8414), registers itself (RFC 7591) or names the
// URL of its metadata document as its client_id, sends the human's
// browser to the consent page in the console (authorization code with
// PKCE S256, RFC 7636; the resource indicator of RFC 8707 bound into the
// grant), and trades the code for an access token and a refresh token at
// the token endpoint.
//
// The human's consent makes an agent key bound to the mandate they chose
// (through the accounts' repository), listed in the console like any key. Access tokens
// act as that key, for /mcp only, until they expire; refresh tokens
// rotate on use, and a used refresh token presented again revokes the
// key, so the whole family stops. Revoking the key, or disabling the
// account, ends every token of it at its next request. Codes and tokens
// are stored as SHA-256 hashes only (holon.BucketOAuth), like keys.
//
// It may import the domain (holon), web, auth, token, ratelimit,
// clientmeta, origin and accounts (the repository of accounts and keys,
// which it calls inside its own transactions); no other room.
package oauth
