package oauth

import (
	"context"
	"errors"

	"holon.dev/holon/appliance/clientmeta"
)

// Client ID Metadata Documents: a client whose client_id is an https URL
// does not register; it publishes its metadata at that URL, and the
// authorization server reads it there (clientmeta fetches it
// through the guarded network client and honours its HTTP caching). The
// document is checked as a registration is (its redirect URIs, grant
// types, name), and the client it describes is never stored: each
// authorization request reads the document (from the cache while it is
// fresh), so a client that changes its redirect URIs is seen as it is now.
//
// The document is read where the human is: on the consent page (the
// authorization request, and the human's decision). The token endpoint
// does not read it: the code or refresh token a client presents names the
// client it was issued to, so that anonymous requests there cannot make
// the gateway fetch URLs.
//
// A client described so is a public client (PKCE, no secret), like the
// ones that register. Dynamic registration stays for the clients that
// still use it.

// documentClient is the client an https client_id's document describes.
// A document that cannot be fetched or is refused is a *clientmeta.Error.
func (s *Server) documentClient(ctx context.Context, id string) (*client, error) {
	doc, err := s.docs.Fetch(ctx, id)
	if err != nil {
		return nil, err
	}
	c, err := newClient(registrationRequest{
		RedirectURIs: doc.RedirectURIs, GrantTypes: doc.GrantTypes, ResponseTypes: doc.ResponseTypes,
		ClientName: doc.ClientName, ClientURI: doc.ClientURI, Scope: doc.Scope,
	})
	if err != nil {
		var oe *Error
		why := err.Error()
		if errors.As(err, &oe) {
			why = oe.Description
		}
		return nil, &clientmeta.Error{ClientID: id, Why: why, Err: err}
	}
	c.ID = id
	return c, nil
}

// documentTokenClient is a document's client at the token endpoint: its id,
// and both grants (what it may trade is what its code or refresh token,
// issued after the consent read its document, says).
func documentTokenClient(id string) *client {
	return &client{ID: id, GrantTypes: []string{"authorization_code", "refresh_token"}}
}
