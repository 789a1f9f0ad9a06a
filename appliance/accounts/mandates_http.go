package accounts

import (
	"encoding/json"
	"errors"
	"net/http"
	"strings"

	"github.com/julienschmidt/httprouter"

	"holon.dev/holon"
	"holon.dev/holon/appliance/auth"
	"holon.dev/holon/appliance/token"
	"holon.dev/holon/appliance/web"
	"holon.dev/holon/appliance/wire"
	"holon.dev/holon/gateway"
	"holon.dev/holon/gateway/contract"
)

func (h *handlers) listMandates(w http.ResponseWriter, r *http.Request, _ httprouter.Params, p *auth.Principal) {
	ids, err := h.repo.Mandates(p.Account)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	out, err := MandateStates(h.engine, ids)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	web.JSON(w, http.StatusOK, map[string]any{"mandates": out})
}

// MandateStates reads mandates with their budgets, in the order given.
func MandateStates(e *gateway.Engine, ids []string) ([]*gateway.MandateState, error) {
	out := []*gateway.MandateState{}
	for _, id := range ids {
		st, err := e.Mandate(id)
		if err != nil {
			return nil, err
		}
		out = append(out, st)
	}
	return out, nil
}

// createMandate is POST /v0/mandates: a root mandate of the caller's. The
// id is put in the caller's namespace, the issuer is the caller, the
// grantee must be <handle>/…, the currency is EUR and fx is the
// platform's; everything else is checked as any mandate is.
func (h *handlers) createMandate(w http.ResponseWriter, r *http.Request, _ httprouter.Params, p *auth.Principal) {
	b, err := web.ReadBody(r)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	var doc map[string]any
	if err := gateway.DecodeJSON(b, &doc, "body"); err != nil {
		h.fail(w, r, err)
		return
	}
	if doc == nil {
		h.fail(w, r, holon.Errorf(holon.CodeInvalidRequest, "body: want a mandate as a JSON object"))
		return
	}
	var fe []holon.FieldError
	bad := func(path, msg string) { fe = append(fe, holon.FieldError{Path: path, Msg: msg}) }
	id, _ := doc["id"].(string)
	if name, ok := strings.CutPrefix(id, p.Account+"/"); ok {
		id = name
	}
	switch {
	case id == "":
		bad("id", "required: a name for the mandate, put in your namespace ("+p.Account+"/<name>)")
	case strings.Contains(id, "/"):
		bad("id", "must be in your namespace: "+p.Account+"/<name>")
	case strings.Contains(id, "."):
		bad("id", "a mandate name has no '.', which marks the sub-mandates derived for agents' runs")
	}
	if v, ok := doc["issuer"]; ok && v != p.Account {
		bad("issuer", "is always you ("+p.Account+"): leave it out")
	}
	if v, ok := doc["currency"]; ok && v != Currency {
		bad("currency", "hosted mandates are in "+Currency)
	}
	if _, ok := doc["fx"]; ok {
		bad("fx", "exchange rates are set by the platform: leave fx out")
	}
	if _, ok := doc["parent"]; ok {
		bad("parent", "only derived sub-mandates have a parent")
	}
	if _, ok := doc["revoked"]; ok {
		bad("revoked", "a new mandate is not revoked: leave it out")
	}
	if g, ok := doc["grantee"].(string); ok && !strings.HasPrefix(g, p.Account+"/") {
		bad("grantee", "must be one of your agents: "+p.Account+"/<name>")
	}
	if len(fe) > 0 {
		h.fail(w, r, &holon.Error{Code: holon.CodeInvalidMandate, Msg: "mandate is invalid", Fields: fe})
		return
	}
	doc["id"] = p.Account + "/" + id
	doc["issuer"] = p.Account
	doc["currency"] = Currency
	if fx := h.repo.PlatformFX(); fx != nil {
		doc["fx"] = fx
	}
	raw, err := json.Marshal(doc)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	m, err := contract.ParseMandate(raw)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	err = h.repo.Update(r.Context(), func(tx holon.Tx) error { return h.repo.AddMandate(tx, p.Account, m) })
	if err != nil {
		h.fail(w, r, err)
		return
	}
	st, err := h.engine.Mandate(m.ID)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	web.JSON(w, http.StatusCreated, st)
}

type keyBody struct {
	Mandate     string `json:"mandate"`
	AskInClient bool   `json:"ask_in_client,omitempty"`
}

// newKeyAnswer carries a new key: the only time it is shown.
type newKeyAnswer struct {
	Key string `json:"key"`
	wire.KeyView
	Note string `json:"note"`
}

// createKey is POST /v0/keys: a new agent key bound to one of the
// caller's root mandates.
func (h *handlers) createKey(w http.ResponseWriter, r *http.Request, _ httprouter.Params, p *auth.Principal) {
	var body keyBody
	if err := web.DecodeBody(r, &body); err != nil {
		h.fail(w, r, err)
		return
	}
	if body.Mandate == "" {
		h.fail(w, r, holon.Errorf(holon.CodeInvalidRequest, "mandate is required: the mandate the new agent key acts under, such as %s/sandbox", p.Account))
		return
	}
	var key string
	var rec *auth.Key
	err := h.repo.Update(r.Context(), func(tx holon.Tx) error {
		var err error
		if key, rec, err = h.repo.DrawKey(token.KindAgent, p.Account, body.Mandate, body.AskInClient); err != nil {
			return err
		}
		acct, err := Get(tx, p.Account)
		if err != nil {
			return err
		}
		if !acct.HasMandate(body.Mandate) {
			return web.NotFound("no mandate %s", body.Mandate)
		}
		if full, err := KeysFull(tx, p.Account, h.repo.now()); err != nil {
			return err
		} else if full {
			return holon.Errorf(CodeLimitReached, "an account holds at most %d live keys: revoke one with DELETE /v0/keys/{prefix}", MaxKeys)
		}
		return PutKey(tx, rec)
	})
	if err != nil {
		h.fail(w, r, err)
		return
	}
	w.Header().Set("Cache-Control", "no-store")
	web.JSON(w, http.StatusCreated, newKeyAnswer{Key: key, KeyView: rec.View(),
		Note: "The key is shown once, now: store it. It acts under " + body.Mandate + " only."})
}

// revokeKey is DELETE /v0/keys/{prefix}: one of the caller's keys stops
// working at once.
func (h *handlers) revokeKey(w http.ResponseWriter, r *http.Request, ps httprouter.Params, p *auth.Principal) {
	prefix := ps.ByName("prefix")
	if len(prefix) != token.PrefixLen || !strings.HasPrefix(prefix, "hlk_") {
		h.fail(w, r, holon.Errorf(holon.CodeInvalidRequest, "%q is not a key prefix: name a key by its first %d characters, such as hlk_a_ab12cd34 (GET /v0/me lists them), never the whole key", token.Redact(prefix), token.PrefixLen))
		return
	}
	var rec *auth.Key
	err := h.repo.Update(r.Context(), func(tx holon.Tx) error {
		var err error
		if rec, err = KeyByPrefix(tx, p.Account, prefix); errors.Is(err, holon.ErrNotFound) {
			return web.NotFound("no key %s", prefix)
		} else if err != nil {
			return err
		}
		if rec.Revoked != nil {
			return holon.Errorf(CodeKeyRevoked, "key %s was revoked already", prefix)
		}
		return RevokeKey(tx, rec, h.repo.now())
	})
	if err != nil {
		h.fail(w, r, err)
		return
	}
	web.JSON(w, http.StatusOK, map[string]any{"prefix": rec.Prefix, "revoked": rec.Revoked})
}
