package publishing

import (
	"encoding/json"
	"errors"
	"net/http"
	"time"

	"github.com/julienschmidt/httprouter"

	"holon.dev/holon"
	"holon.dev/holon/appliance/auth"
	"holon.dev/holon/appliance/web"
	"holon.dev/holon/gateway/contract"
)

// checkToken wants 1 to 4096 visible ASCII characters: a header value
// (invalid_credential, 400: a malformed field, not a refused bearer).
func checkToken(tok string) error {
	if tok == "" {
		return holon.Errorf(CodeInvalidCredential, `token is required: {"token": "<the token your server expects>"}`)
	}
	if len(tok) > maxTokenLen {
		return holon.Errorf(CodeInvalidCredential, "token is longer than %d characters", maxTokenLen)
	}
	for i := 0; i < len(tok); i++ {
		if c := tok[i]; c < 0x21 || c > 0x7e {
			return holon.Errorf(CodeInvalidCredential, "token must be visible ASCII characters only (no spaces or control characters): it is sent as Authorization: Bearer <token>")
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
func (h *handlers) putCredential(w http.ResponseWriter, r *http.Request, ps httprouter.Params, p *auth.Principal) {
	v := h.vault
	id, err := credentialAgent(ps, p)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	var body credentialBody
	if err := web.DecodeBody(r, &body); err != nil {
		h.fail(w, r, err)
		return
	}
	if err := checkToken(body.Token); err != nil {
		h.fail(w, r, err)
		return
	}
	if v.aead == nil {
		h.fail(w, r, holon.Errorf(CodeCredentialsOff, "endpoint credentials need HOLON_FILE_SECRET, which this gateway does not have: the operator sets it"))
		return
	}
	now := h.now().UTC()
	rec, err := v.seal(id, body.Token, now)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	if err := v.store.Update(r.Context(), func(tx holon.Tx) error { return tx.Put(holon.BucketCredentials, id, rec) }); err != nil {
		h.fail(w, r, err)
		return
	}
	v.mu.Lock()
	v.open[id] = body.Token
	v.mu.Unlock()
	web.JSON(w, http.StatusOK, map[string]any{"agent": id, "credential_set": true, "set": now})
}

// deleteCredential is DELETE /v0/agents/{ns}/{name}/credential.
func (h *handlers) deleteCredential(w http.ResponseWriter, r *http.Request, ps httprouter.Params, p *auth.Principal) {
	v := h.vault
	id, err := credentialAgent(ps, p)
	if err != nil {
		h.fail(w, r, err)
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
		h.fail(w, r, err)
		return
	}
	v.mu.Lock()
	delete(v.open, id)
	v.mu.Unlock()
	web.JSON(w, http.StatusOK, map[string]any{"agent": id, "credential_set": false})
}

// credentialStatus is one agent's endpoint credential as its author sees
// it: whether one is set, and since when; never the token.
type credentialStatus struct {
	Agent string    `json:"agent"`
	Set   time.Time `json:"set"`
	// Opens is false for a token sealed under another HOLON_FILE_SECRET:
	// calls go without it until its author sets it again.
	Opens bool `json:"opens"`
}

// listCredentials is GET /v0/me/credentials (human key): the agents of
// the caller's namespace that have an endpoint credential set.
func (h *handlers) listCredentials(w http.ResponseWriter, r *http.Request, _ httprouter.Params, p *auth.Principal) {
	v := h.vault
	out := []credentialStatus{}
	err := v.store.View(func(tx holon.Tx) error {
		return tx.ForEach(holon.BucketCredentials, p.Account+"/", func(id string, raw json.RawMessage) (bool, error) {
			var rec credentialRecord
			if err := json.Unmarshal(raw, &rec); err != nil {
				return false, err
			}
			out = append(out, credentialStatus{Agent: id, Set: rec.Set, Opens: v.Has(id)})
			return true, nil
		})
	})
	if err != nil {
		h.fail(w, r, err)
		return
	}
	web.JSON(w, http.StatusOK, map[string]any{"credentials": out})
}
