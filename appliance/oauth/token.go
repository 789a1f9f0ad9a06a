package oauth

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/julienschmidt/httprouter"

	"holon.dev/holon"
	"holon.dev/holon/appliance/accounts"
	"holon.dev/holon/appliance/auth"
	"holon.dev/holon/appliance/clientmeta"
	"holon.dev/holon/appliance/token"
	"holon.dev/holon/appliance/web"
)

// tokenAnswer is RFC 6749 §5.1's answer.
type tokenAnswer struct {
	AccessToken  string `json:"access_token"`
	TokenType    string `json:"token_type"`
	ExpiresIn    int64  `json:"expires_in"`
	RefreshToken string `json:"refresh_token"`
	Scope        string `json:"scope,omitempty"`
}

// pkceVerifier is a code verifier (RFC 7636 §4.1).
var pkceVerifier = regexp.MustCompile(`^[A-Za-z0-9._~-]{43,128}$`)

// token is POST /oauth/token: an authorization code (with its PKCE
// verifier) or a refresh token traded for a new access token and a new
// refresh token. Public clients only: the client_id is in the form.
func (s *Server) token(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
	if err := r.ParseForm(); err != nil {
		s.writeError(w, r, Errorf("invalid_request", "the body must be application/x-www-form-urlencoded: %v", err))
		return
	}
	f := r.PostForm
	for k, vs := range f {
		if len(vs) > 1 {
			s.writeError(w, r, Errorf("invalid_request", "%s is sent more than once", k))
			return
		}
	}
	clientID := f.Get("client_id")
	if u, _, ok := r.BasicAuth(); ok && clientID == "" {
		// A client that sends its id as client_secret_basic, with no
		// secret: it is still a public client.
		clientID, _ = url.QueryUnescape(u)
	}
	var c *client
	var err error
	if clientmeta.IsURL(clientID) {
		// A client described by its metadata document: the document was
		// read when the human consented, and the code or refresh token
		// presented names the client it was issued to, so an anonymous
		// request here never makes the gateway fetch anything.
		c = documentTokenClient(clientID)
	} else {
		c, err = s.getClient(r.Context(), clientID)
	}
	if errors.Is(err, holon.ErrNotFound) {
		s.writeError(w, r, Errorf("invalid_client", "unknown client_id %q: register the client first (%s)", clientID, registerPath))
		return
	} else if err != nil {
		s.writeError(w, r, err)
		return
	}
	if res := f.Get("resource"); res != "" && res != s.resource(r) {
		s.writeError(w, r, Errorf("invalid_target", "resource must be %s: this server issues tokens for its /mcp only", s.resource(r)))
		return
	}
	var ans *tokenAnswer
	switch g := f.Get("grant_type"); g {
	case "authorization_code":
		ans, err = s.exchangeCode(r, c, f.Get("code"), f.Get("code_verifier"), f.Get("redirect_uri"))
	case "refresh_token":
		if !slices.Contains(c.GrantTypes, "refresh_token") {
			err = Errorf("unauthorized_client", "the client did not register the refresh_token grant")
			break
		}
		ans, err = s.refresh(r, c, f.Get("refresh_token"))
	case "":
		err = Errorf("invalid_request", "grant_type is required: authorization_code or refresh_token")
	default:
		err = Errorf("unsupported_grant_type", "grant_type %q is not offered here: authorization_code or refresh_token", g)
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Pragma", "no-cache")
	w.Header().Set("Access-Control-Allow-Origin", "*")
	web.JSON(w, http.StatusOK, ans)
}

// s256 is the S256 code challenge of a verifier.
func s256(verifier string) string {
	sum := sha256.Sum256([]byte(verifier))
	return base64.RawURLEncoding.EncodeToString(sum[:])
}

// errRevokedFamily carries an invalid_grant out of a transaction that
// must still commit (it revoked the key of a code or token used twice).
type errRevokedFamily struct{ *Error }

// exchangeCode trades an authorization code: once, by the client it was
// issued to, with the same redirect URI and the PKCE verifier of its
// challenge. It makes the agent key the human agreed to and its first
// tokens. A code presented a second time revokes that key.
func (s *Server) exchangeCode(r *http.Request, c *client, secret, verifier, redirectURI string) (*tokenAnswer, error) {
	switch {
	case secret == "":
		return nil, Errorf("invalid_request", "code is required")
	case verifier == "":
		return nil, Errorf("invalid_request", "code_verifier is required: this server needs PKCE")
	case !pkceVerifier.MatchString(verifier):
		return nil, Errorf("invalid_request", "code_verifier must be 43 to 128 characters of A-Z a-z 0-9 - . _ ~")
	}
	var ans *tokenAnswer
	var revoked *errRevokedFamily
	err := accounts.DrawUpdate(r.Context(), s.store, func(tx holon.Tx) error {
		ans, revoked = nil, nil
		var rec code
		ck := secretKey("code", secret)
		if err := tx.Get(holon.BucketOAuth, ck, &rec); errors.Is(err, holon.ErrNotFound) {
			return Errorf("invalid_grant", "unknown code: it was never issued here")
		} else if err != nil {
			return err
		}
		now := s.now().UTC()
		switch {
		case rec.Client != c.ID:
			return Errorf("invalid_grant", "the code was issued to another client")
		case rec.Used != nil:
			if rec.KeyHash != "" {
				if err := accounts.RevokeKeyByHash(tx, rec.KeyHash, now); err != nil {
					return err
				}
			}
			revoked = &errRevokedFamily{Errorf("invalid_grant", "the code was used already: the access it gave is revoked; authorize again")}
			return nil
		case !now.Before(rec.Expires):
			return Errorf("invalid_grant", "the code expired at %s: authorize again", rec.Expires.Format(time.RFC3339))
		case redirectURI != rec.RedirectURI:
			return Errorf("invalid_grant", "redirect_uri must be the one of the authorization request")
		case subtle.ConstantTimeCompare([]byte(s256(verifier)), []byte(rec.Challenge)) != 1:
			return Errorf("invalid_grant", "code_verifier does not match the code_challenge of the authorization request")
		}
		acct, err := accounts.Get(tx, rec.Account)
		if err != nil {
			return err
		}
		if acct.Disabled != nil {
			return Errorf("invalid_grant", "the account %s is disabled", rec.Account)
		}
		if !acct.HasMandate(rec.Mandate) {
			return Errorf("invalid_grant", "the mandate %s is gone", rec.Mandate)
		}
		if full, err := accounts.KeysFull(tx, rec.Account, now); err != nil {
			return err
		} else if full {
			return Errorf("invalid_grant", "the account holds %d live keys, the most it may: revoke one in the console and authorize again", accounts.MaxKeys)
		}
		// The key's own secret is drawn and dropped: the key is used
		// only through its tokens.
		_, key, err := s.accounts.DrawKey(token.KindAgent, rec.Account, rec.Mandate, rec.Ask)
		if err != nil {
			return err
		}
		key.Client = rec.ClientName
		if err := accounts.PutKey(tx, key); err != nil {
			return err
		}
		rec.Used, rec.KeyHash = &now, key.Hash
		if err := tx.Put(holon.BucketOAuth, ck, rec); err != nil {
			return err
		}
		ans, err = s.issueTokens(tx, key, c.ID, rec.Resource, rec.Scope, now)
		return err
	})
	if err != nil {
		return nil, err
	}
	if revoked != nil {
		return nil, revoked.Error
	}
	return ans, nil
}

// refresh trades a refresh token for new tokens. Each refresh token works
// once: presented again, it revokes the key it belongs to, so that a
// stolen refresh token is worth nothing once either party has used it.
func (s *Server) refresh(r *http.Request, c *client, secret string) (*tokenAnswer, error) {
	if secret == "" {
		return nil, Errorf("invalid_request", "refresh_token is required")
	}
	var ans *tokenAnswer
	var revoked *errRevokedFamily
	err := s.store.Update(r.Context(), func(tx holon.Tx) error {
		ans, revoked = nil, nil
		var rec refresh
		rk := secretKey("refresh", secret)
		if err := tx.Get(holon.BucketOAuth, rk, &rec); errors.Is(err, holon.ErrNotFound) {
			return Errorf("invalid_grant", "unknown refresh token")
		} else if err != nil {
			return err
		}
		now := s.now().UTC()
		switch {
		case rec.Client != c.ID:
			return Errorf("invalid_grant", "the refresh token was issued to another client")
		case rec.Used != nil:
			if err := accounts.RevokeKeyByHash(tx, rec.KeyHash, now); err != nil {
				return err
			}
			revoked = &errRevokedFamily{Errorf("invalid_grant", "the refresh token was used already: every token of this connection is revoked; authorize again")}
			return nil
		case !now.Before(rec.Expires):
			return Errorf("invalid_grant", "the refresh token expired: authorize again")
		}
		key, err := accounts.KeyByHash(tx, rec.KeyHash)
		if err != nil {
			return err
		}
		acct, err := accounts.Get(tx, key.Account)
		if err != nil {
			return err
		}
		switch {
		case key.Revoked != nil:
			return Errorf("invalid_grant", "the connection (key %s…) was revoked: authorize again", key.Prefix)
		case acct.Disabled != nil:
			return Errorf("invalid_grant", "the account %s is disabled", key.Account)
		}
		rec.Used = &now
		if err := tx.Put(holon.BucketOAuth, rk, rec); err != nil {
			return err
		}
		if err := tx.Delete(holon.BucketOAuth, rec.Access); err != nil {
			return err
		}
		ans, err = s.issueTokens(tx, key, c.ID, rec.Resource, rec.Scope, now)
		return err
	})
	if err != nil {
		return nil, err
	}
	if revoked != nil {
		return nil, revoked.Error
	}
	return ans, nil
}

// issueTokens stores a new access token and refresh token for a key.
func (s *Server) issueTokens(tx holon.Tx, key *auth.Key, client, resource, scope string, now time.Time) (*tokenAnswer, error) {
	scope = strings.Join(storedScope(scope), " ")
	if err := s.prune(tx, now); err != nil {
		return nil, err
	}
	// The key lives as long as its newest refresh token: a connection
	// nobody refreshes for refreshTTL ends by itself, and stops
	// counting against the account's live keys.
	exp := now.Add(refreshTTL)
	key.Expires = &exp
	if err := accounts.UpdateKey(tx, key); err != nil {
		return nil, err
	}
	accessToken, err := s.drawSecret(accessMarker)
	if err != nil {
		return nil, err
	}
	refreshToken, err := s.drawSecret(refreshMarker)
	if err != nil {
		return nil, err
	}
	ak := secretKey("access", accessToken)
	if err := tx.Put(holon.BucketOAuth, ak, access{KeyHash: key.Hash, Prefix: key.Prefix, Resource: resource, Scope: scope, Expires: now.Add(accessTTL)}); err != nil {
		return nil, err
	}
	rt := refresh{KeyHash: key.Hash, Client: client, Resource: resource, Scope: scope, Expires: now.Add(refreshTTL), Access: ak}
	if err := tx.Put(holon.BucketOAuth, secretKey("refresh", refreshToken), rt); err != nil {
		return nil, err
	}
	return &tokenAnswer{AccessToken: accessToken, TokenType: "Bearer", ExpiresIn: int64(accessTTL / time.Second), RefreshToken: refreshToken, Scope: scope}, nil
}

// tokenPrincipal is the principal of an OAuth access token: the agent key
// it was issued for, on /mcp only, for this gateway's resource, until it
// expires; and only while the key is live and its account enabled.
func (s *Server) tokenPrincipal(r *http.Request, bearer string) (*auth.Principal, error) {
	body := strings.TrimPrefix(bearer, accessMarker)
	if len(body) != token.BodyLen {
		return nil, holon.Errorf(web.CodeInvalidKey, "the access bearer is malformed")
	}
	var rec access
	err := s.store.View(func(tx holon.Tx) error { return tx.Get(holon.BucketOAuth, secretKey("access", bearer), &rec) })
	switch {
	case errors.Is(err, holon.ErrNotFound):
		return nil, holon.Errorf(web.CodeInvalidKey, "unknown access bearer (or one replaced by a refresh): refresh it or authorize again")
	case err != nil:
		return nil, fmt.Errorf("authenticate: %w", err)
	case !s.now().Before(rec.Expires):
		return nil, holon.Errorf(web.CodeInvalidKey, "the access bearer expired at %s: refresh it", rec.Expires.UTC().Format(time.RFC3339))
	case rec.Resource != s.resource(r):
		return nil, holon.Errorf(web.CodeInvalidKey, "the access bearer was issued for %s, not for %s", rec.Resource, s.resource(r))
	}
	if err := needScope(r, storedScope(rec.Scope)); err != nil {
		return nil, err
	}
	return s.accounts.KeyPrincipal(rec.KeyHash, token.KindAgent, rec.Prefix)
}

// pruneOAuth deletes the expired codes and tokens of one 256th of the
// store (the slice whose hashes start with two hex digits drawn at
// random), so that the records of old grants do not pile up while no
// single request pays for a full scan.
func (s *Server) prune(tx holon.Tx, now time.Time) error {
	var b [1]byte
	if _, err := io.ReadFull(s.rand, b[:]); err != nil {
		return fmt.Errorf("draw a slice to prune: %w", err)
	}
	slice := hex.EncodeToString(b[:])
	var expired []string
	for _, kind := range []string{"code", "access", "refresh"} {
		err := tx.ForEach(holon.BucketOAuth, kind+"/"+slice, func(key string, raw json.RawMessage) (bool, error) {
			var rec struct {
				Expires time.Time  `json:"expires"`
				Used    *time.Time `json:"used"`
			}
			if err := json.Unmarshal(raw, &rec); err != nil {
				return false, fmt.Errorf("oauth record %s: %w", key, err)
			}
			end := rec.Expires
			if kind == "code" && rec.Used != nil {
				// A used code is kept as long as the tokens it gave may
				// live, so that presenting it again still revokes them.
				end = end.Add(refreshTTL)
			}
			if !now.Before(end) {
				expired = append(expired, key)
			}
			return true, nil
		})
		if err != nil {
			return err
		}
	}
	for _, key := range expired {
		if err := tx.Delete(holon.BucketOAuth, key); err != nil {
			return err
		}
	}
	return nil
}

// verifyAccessToken is the verifier of the access tokens this server
// issues, in the API's chain (Mount).
func (s *Server) verifyAccessToken(r *http.Request, credential string) (*auth.Principal, bool, error) {
	if !strings.HasPrefix(credential, accessMarker) {
		return nil, false, nil
	}
	p, err := s.tokenPrincipal(r, credential)
	return p, true, err
}
