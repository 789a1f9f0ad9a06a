package appliance

import (
	"encoding/json"
	"errors"
	"maps"
	"net/http"
	"slices"
	"strings"

	"github.com/julienschmidt/httprouter"

	"holon.dev/holon"
	"holon.dev/holon/appliance/auth"
	"holon.dev/holon/appliance/token"
	"holon.dev/holon/appliance/web"
	"holon.dev/holon/appliance/wire"
	"holon.dev/holon/gateway"
	"holon.dev/holon/gateway/contract"
	"holon.dev/holon/journal"
)

// hostedCurrency is the currency of every hosted mandate.
const hostedCurrency = "EUR"

// maxMandatesPerAccount bounds the root mandates of an account.
const maxMandatesPerAccount = 100

// starterMandate is a new account's <handle>/sandbox: a small budget to
// try the shipped agents with, approval above 0.50.
func (h *hosted) starterMandate(handle string) *contract.Mandate {
	amount := func(s string) *journal.Amount { a := journal.MustParseAmount(s); return &a }
	depth := 1
	allow := h.starterAllow
	if len(allow) == 0 {
		allow = []string{"holon-labs/*"}
	}
	return &contract.Mandate{
		ID:         handle + "/sandbox",
		Issuer:     handle,
		Grantee:    handle + "/assistant",
		Currency:   hostedCurrency,
		Budget:     contract.Budget{Total: amount("5.00"), PerCall: amount("1.00")},
		Approval:   &contract.Approval{Above: amount("0.50")},
		Allow:      contract.Allow{Agents: slices.Clone(allow), Capabilities: []string{"*"}},
		FX:         h.platformFX(),
		Delegation: &contract.Delegation{MaxDepth: &depth},
	}
}

// platformFX is the fx of a hosted mandate: the platform's rates, never
// the caller's.
func (h *hosted) platformFX() map[string]journal.Rate {
	fx := maps.Clone(h.fx)
	delete(fx, hostedCurrency)
	if len(fx) == 0 {
		return nil
	}
	return fx
}

func (a *api) listMandates(w http.ResponseWriter, r *http.Request, _ httprouter.Params, p *auth.Principal) {
	ids, err := a.hosted.accountMandates(p.Account)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	out, err := a.mandateStates(ids)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	web.JSON(w, http.StatusOK, map[string]any{"mandates": out})
}

// mandateStates reads mandates with their budgets, in the order given.
func (a *api) mandateStates(ids []string) ([]*gateway.MandateState, error) {
	out := []*gateway.MandateState{}
	for _, id := range ids {
		st, err := a.engine.Mandate(id)
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
func (a *api) createMandate(w http.ResponseWriter, r *http.Request, _ httprouter.Params, p *auth.Principal) {
	h := a.hosted
	b, err := web.ReadBody(r)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	var doc map[string]any
	if err := gateway.DecodeJSON(b, &doc, "body"); err != nil {
		a.fail(w, r, err)
		return
	}
	if doc == nil {
		a.fail(w, r, holon.Errorf(holon.CodeInvalidRequest, "body: want a mandate as a JSON object"))
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
	if v, ok := doc["currency"]; ok && v != hostedCurrency {
		bad("currency", "hosted mandates are in "+hostedCurrency)
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
		a.fail(w, r, &holon.Error{Code: holon.CodeInvalidMandate, Msg: "mandate is invalid", Fields: fe})
		return
	}
	doc["id"] = p.Account + "/" + id
	doc["issuer"] = p.Account
	doc["currency"] = hostedCurrency
	if fx := h.platformFX(); fx != nil {
		doc["fx"] = fx
	}
	raw, err := json.Marshal(doc)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	m, err := contract.ParseMandate(raw)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	err = h.store.Update(r.Context(), func(tx holon.Tx) error {
		var acct account
		if err := tx.Get(holon.BucketUsers, p.Account, &acct); err != nil {
			return err
		}
		if _, err := tx.Mandate(m.ID); err == nil {
			return holon.Errorf(CodeMandateExists, "%s exists already: pick another name", m.ID)
		} else if !errors.Is(err, holon.ErrNotFound) {
			return err
		}
		if len(acct.Mandates) >= maxMandatesPerAccount {
			return holon.Errorf(CodeLimitReached, "an account holds at most %d mandates", maxMandatesPerAccount)
		}
		acct.Mandates = append(acct.Mandates, m.ID)
		if err := tx.Put(holon.BucketUsers, p.Account, acct); err != nil {
			return err
		}
		return h.engine.PutMandateTx(tx, m)
	})
	if err != nil {
		a.fail(w, r, err)
		return
	}
	st, err := a.engine.Mandate(m.ID)
	if err != nil {
		a.fail(w, r, err)
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
func (a *api) createKey(w http.ResponseWriter, r *http.Request, _ httprouter.Params, p *auth.Principal) {
	h := a.hosted
	var body keyBody
	if err := web.DecodeBody(r, &body); err != nil {
		a.fail(w, r, err)
		return
	}
	if body.Mandate == "" {
		a.fail(w, r, holon.Errorf(holon.CodeInvalidRequest, "mandate is required: the mandate the new agent key acts under, such as %s/sandbox", p.Account))
		return
	}
	for attempt := 0; ; attempt++ {
		key, rec, err := h.drawKey(token.KindAgent, p.Account, body.Mandate, body.AskInClient)
		if err != nil {
			a.fail(w, r, err)
			return
		}
		err = h.store.Update(r.Context(), func(tx holon.Tx) error {
			var acct account
			if err := tx.Get(holon.BucketUsers, p.Account, &acct); err != nil {
				return err
			}
			if !slices.Contains(acct.Mandates, body.Mandate) {
				return web.NotFound("no mandate %s", body.Mandate)
			}
			if live, err := liveKeys(tx, p.Account, h.now()); err != nil {
				return err
			} else if live >= maxKeysPerAccount {
				return holon.Errorf(CodeLimitReached, "an account holds at most %d live keys: revoke one with DELETE /v0/keys/{prefix}", maxKeysPerAccount)
			}
			return putKey(tx, rec)
		})
		if errors.Is(err, errKeyCollision) && attempt < 3 {
			continue
		}
		if err != nil {
			a.fail(w, r, err)
			return
		}
		w.Header().Set("Cache-Control", "no-store")
		web.JSON(w, http.StatusCreated, newKeyAnswer{Key: key, KeyView: rec.View(),
			Note: "The key is shown once, now: store it. It acts under " + body.Mandate + " only."})
		return
	}
}

// revokeKey is DELETE /v0/keys/{prefix}: one of the caller's keys stops
// working at once.
func (a *api) revokeKey(w http.ResponseWriter, r *http.Request, ps httprouter.Params, p *auth.Principal) {
	h := a.hosted
	prefix := ps.ByName("prefix")
	if len(prefix) != token.PrefixLen || !strings.HasPrefix(prefix, "hlk_") {
		a.fail(w, r, holon.Errorf(holon.CodeInvalidRequest, "%q is not a key prefix: name a key by its first %d characters, such as hlk_a_ab12cd34 (GET /v0/me lists them), never the whole key", token.Redact(prefix), token.PrefixLen))
		return
	}
	var rec auth.Key
	err := h.store.Update(r.Context(), func(tx holon.Tx) error {
		var hash string
		if err := tx.Get(holon.BucketKeys, keyByAccount(p.Account, prefix), &hash); errors.Is(err, holon.ErrNotFound) {
			return web.NotFound("no key %s", prefix)
		} else if err != nil {
			return err
		}
		if err := tx.Get(holon.BucketKeys, keyByHash(hash), &rec); err != nil {
			return err
		}
		if rec.Revoked != nil {
			return holon.Errorf(CodeKeyRevoked, "key %s was revoked already", prefix)
		}
		return revokeKey(tx, &rec, h.now())
	})
	if err != nil {
		a.fail(w, r, err)
		return
	}
	web.JSON(w, http.StatusOK, map[string]any{"prefix": rec.Prefix, "revoked": rec.Revoked})
}
