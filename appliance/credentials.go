package appliance

import (
	"crypto/aes"
	"crypto/cipher"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/julienschmidt/httprouter"

	"holon.dev/holon"
	"holon.dev/holon/appliance/auth"
	"holon.dev/holon/appliance/web"
	"holon.dev/holon/gateway/contract"
)

// Endpoint credentials (gateway.md §6 "Authentication"): the token an
// author's server wants, set once per agent (ns/name, every version) and
// sent as Authorization: Bearer on every call and evaluation. It is stored
// sealed with AES-256-GCM under a key derived from HOLON_FILE_SECRET by
// HKDF-SHA256 with its own purpose label, bound to the agent id (the
// additional data), so a sealed token copied onto another agent does not
// open. No endpoint returns it: views say only whether one is set.

// credentialPurpose is the HKDF label of the credentials key: the same
// secret signs file links under another label.
const credentialPurpose = "holon/endpoint-credentials/v1"

// maxTokenLen bounds an endpoint token.
const maxTokenLen = 4096

// credentialRecord is a sealed token (holon.BucketCredentials, by agent id).
type credentialRecord struct {
	V      int       `json:"v"`
	Nonce  []byte    `json:"nonce"`
	Sealed []byte    `json:"sealed"`
	Set    time.Time `json:"set"`
}

// vault seals and opens endpoint tokens, and keeps the open ones in
// memory for the runners (the store holds them sealed only).
type vault struct {
	aead  cipher.AEAD // nil without HOLON_FILE_SECRET
	store holon.Store
	rand  io.Reader
	mu    sync.RWMutex
	open  map[string]string
}

// newVault derives the key and opens every stored token. A token that
// does not open (HOLON_FILE_SECRET changed) is left out and logged by
// agent id: its author sets it again.
func newVault(secret []byte, store holon.Store, rand io.Reader, log *slog.Logger) (*vault, error) {
	v := &vault{store: store, rand: rand, open: map[string]string{}}
	if len(secret) == 0 {
		return v, nil
	}
	block, err := aes.NewCipher(hkdfKey(secret, credentialPurpose))
	if err != nil {
		return nil, err
	}
	if v.aead, err = cipher.NewGCM(block); err != nil {
		return nil, err
	}
	err = store.View(func(tx holon.Tx) error {
		return tx.ForEach(holon.BucketCredentials, "", func(id string, raw json.RawMessage) (bool, error) {
			var rec credentialRecord
			if err := json.Unmarshal(raw, &rec); err != nil {
				return false, fmt.Errorf("credential of %s: %w", id, err)
			}
			tok, err := v.aead.Open(nil, rec.Nonce, rec.Sealed, []byte(id))
			if err != nil {
				log.Warn("endpoint credential does not open with this HOLON_FILE_SECRET: its author must set it again", "agent", id)
				return true, nil
			}
			v.open[id] = string(tok)
			return true, nil
		})
	})
	return v, err
}

// token is the runners' lookup (remote.Config.Credentials).
func (v *vault) token(agentID string) (string, bool) {
	v.mu.RLock()
	defer v.mu.RUnlock()
	t, ok := v.open[agentID]
	return t, ok
}

// has reports whether an agent has a token set.
func (v *vault) has(agentID string) bool {
	_, ok := v.token(agentID)
	return ok
}

func (v *vault) seal(agentID, token string, now time.Time) (credentialRecord, error) {
	nonce := make([]byte, v.aead.NonceSize())
	if _, err := io.ReadFull(v.rand, nonce); err != nil {
		return credentialRecord{}, fmt.Errorf("draw a nonce: %w", err)
	}
	return credentialRecord{V: 1, Nonce: nonce, Sealed: v.aead.Seal(nil, nonce, []byte(token), []byte(agentID)), Set: now}, nil
}

// checkToken wants 1 to 4096 visible ASCII characters: a header value.
func checkToken(tok string) error {
	if tok == "" {
		return holon.Errorf(CodeInvalidToken, `token is required: {"token": "<the token your server expects>"}`)
	}
	if len(tok) > maxTokenLen {
		return holon.Errorf(CodeInvalidToken, "token is longer than %d characters", maxTokenLen)
	}
	for i := 0; i < len(tok); i++ {
		if c := tok[i]; c < 0x21 || c > 0x7e {
			return holon.Errorf(CodeInvalidToken, "token must be visible ASCII characters only (no spaces or control characters): it is sent as Authorization: Bearer <token>")
		}
	}
	return nil
}

// credentialAgent is the agent id of a credential path, which must be in
// the caller's namespace; the agent need not be published yet.
func credentialAgent(ps httprouter.Params, p *auth.Principal) (string, error) {
	ns, name := ps.ByName("ns"), ps.ByName("name")
	if !contract.ValidAgentName(name) {
		return "", holon.Errorf(holon.CodeInvalidRequest, "%q is not an agent name (1-64 lowercase letters, digits, - and _; no version: a credential serves every version)", name)
	}
	if ns != p.Account {
		return "", holon.Errorf(CodeNotYourNamespace, "%s/%s is outside your namespace: set credentials for %s/<name>", ns, name, p.Account)
	}
	return ns + "/" + name, nil
}

type credentialBody struct {
	Token string `json:"token"`
}

// putCredential is PUT /v0/agents/{ns}/{name}/credential.
func (a *api) putCredential(w http.ResponseWriter, r *http.Request, ps httprouter.Params, p *auth.Principal) {
	v := a.hosted.vault
	id, err := credentialAgent(ps, p)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	var body credentialBody
	if err := web.DecodeBody(r, &body); err != nil {
		a.fail(w, r, err)
		return
	}
	if err := checkToken(body.Token); err != nil {
		// 400, not the table's 401 for invalid_token: here the code names
		// a malformed field of the body, not a refused bearer token.
		web.Error(w, http.StatusBadRequest, err)
		return
	}
	if v.aead == nil {
		a.fail(w, r, holon.Errorf(CodeCredentialsOff, "endpoint credentials need HOLON_FILE_SECRET, which this gateway does not have: the operator sets it"))
		return
	}
	now := a.hosted.now().UTC()
	rec, err := v.seal(id, body.Token, now)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	if err := v.store.Update(r.Context(), func(tx holon.Tx) error { return tx.Put(holon.BucketCredentials, id, rec) }); err != nil {
		a.fail(w, r, err)
		return
	}
	v.mu.Lock()
	v.open[id] = body.Token
	v.mu.Unlock()
	web.JSON(w, http.StatusOK, map[string]any{"agent": id, "credential_set": true, "set": now})
}

// deleteCredential is DELETE /v0/agents/{ns}/{name}/credential.
func (a *api) deleteCredential(w http.ResponseWriter, r *http.Request, ps httprouter.Params, p *auth.Principal) {
	v := a.hosted.vault
	id, err := credentialAgent(ps, p)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	err = v.store.Update(r.Context(), func(tx holon.Tx) error {
		var rec credentialRecord
		if err := tx.Get(holon.BucketCredentials, id, &rec); errors.Is(err, holon.ErrNotFound) {
			return web.NotFound("%s has no credential set", id)
		} else if err != nil {
			return err
		}
		return tx.Delete(holon.BucketCredentials, id)
	})
	if err != nil {
		a.fail(w, r, err)
		return
	}
	v.mu.Lock()
	delete(v.open, id)
	v.mu.Unlock()
	web.JSON(w, http.StatusOK, map[string]any{"agent": id, "credential_set": false})
}
