package oauth

import (
	"encoding/json"
	"time"

	"holon.dev/holon"
	"holon.dev/holon/appliance/token"
)

// client is a registered client ("client/<id>"). Its name is what it
// says it is: nobody checked it.
type client struct {
	ID           string    `json:"client_id"`
	Name         string    `json:"client_name"`
	URI          string    `json:"client_uri,omitempty"`
	RedirectURIs []string  `json:"redirect_uris"`
	GrantTypes   []string  `json:"grant_types"`
	Created      time.Time `json:"created"`
}

// code is an authorization code, by its hash ("code/<sha256>"): the
// human's decision, waiting for the client to trade it once.
type code struct {
	Client      string    `json:"client_id"`
	ClientName  string    `json:"client_name"`
	RedirectURI string    `json:"redirect_uri"`
	Challenge   string    `json:"code_challenge"`
	Resource    string    `json:"resource"`
	Scope       string    `json:"scope,omitempty"`
	Account     string    `json:"account"`
	Mandate     string    `json:"mandate"`
	Ask         bool      `json:"ask_in_client"`
	Expires     time.Time `json:"expires"`
	// Used is set when the code was traded; KeyHash is the key it made,
	// revoked when the code comes back.
	Used    *time.Time `json:"used,omitempty"`
	KeyHash string     `json:"key_hash,omitempty"`
}

// access is an access token, by its hash ("access/<sha256>").
type access struct {
	KeyHash  string `json:"key_hash"`
	Prefix   string `json:"prefix"`
	Resource string `json:"resource"`
	// Scope is the scopes it carries, space-separated (grantScope); none
	// in a token issued before scopes existed: ScopeAgents.
	Scope   string    `json:"scope,omitempty"`
	Expires time.Time `json:"expires"`
}

// refresh is a refresh token, by its hash ("refresh/<sha256>").
type refresh struct {
	KeyHash  string    `json:"key_hash"`
	Client   string    `json:"client_id"`
	Resource string    `json:"resource"`
	Scope    string    `json:"scope,omitempty"`
	Expires  time.Time `json:"expires"`
	// Access is the hash of the access token issued with it, deleted when
	// the refresh token is used.
	Access string     `json:"access"`
	Used   *time.Time `json:"used,omitempty"`
}

func clientKey(id string) string { return "client/" + id }

func secretKey(kind, secret string) string {
	return kind + "/" + token.Hash(secret)
}

// DropPendingCodes deletes, in tx, the authorization codes of an account
// that were not traded yet: what an account taken over by its proved
// owner must not let anyone trade.
func DropPendingCodes(tx holon.Tx, account string) error {
	var codes []string
	err := tx.ForEach(holon.BucketOAuth, "code/", func(k string, raw json.RawMessage) (bool, error) {
		var c code
		if err := json.Unmarshal(raw, &c); err == nil && c.Account == account && c.Used == nil {
			codes = append(codes, k)
		}
		return true, nil
	})
	if err != nil {
		return err
	}
	for _, k := range codes {
		if err := tx.Delete(holon.BucketOAuth, k); err != nil {
			return err
		}
	}
	return nil
}
