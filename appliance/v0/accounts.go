package v0

import (
	"net/http"
	"sort"

	"github.com/julienschmidt/httprouter"

	"holon.dev/holon/appliance/auth"
	"holon.dev/holon/appliance/token"
	"holon.dev/holon/appliance/web"
	"holon.dev/holon/appliance/wire"
)

func (a *API) getMandate(w http.ResponseWriter, r *http.Request, ps httprouter.Params, p *auth.Principal) {
	id := ps.ByName("ns") + "/" + ps.ByName("name")
	if !p.SeesMandate(id) {
		a.fail(w, r, web.NotFound("no mandate %s", id))
		return
	}
	st, err := a.cfg.Engine.Mandate(id)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	web.JSON(w, http.StatusOK, st)
}

// listAccounts is GET /v0/accounts: a human's own balance (one read), or
// every balance for the operator.
func (a *API) listAccounts(w http.ResponseWriter, r *http.Request, _ httprouter.Params, p *auth.Principal) {
	if p.Kind == token.KindHuman {
		ac, err := a.cfg.Engine.Account(p.Account)
		if err != nil {
			a.fail(w, r, err)
			return
		}
		web.JSON(w, http.StatusOK, map[string]any{"accounts": []wire.AccountView{{Account: p.Account, Balance: wire.Money(ac.Balance), Held: wire.Money(ac.Held), Available: wire.Money(ac.Available())}}})
		return
	}
	accts, err := a.cfg.Engine.Accounts()
	if err != nil {
		a.fail(w, r, err)
		return
	}
	out := make([]wire.AccountView, 0, len(accts))
	for name, ac := range accts {
		if p.SeesAccount(name) {
			out = append(out, wire.AccountView{Account: name, Balance: wire.Money(ac.Balance), Held: wire.Money(ac.Held), Available: wire.Money(ac.Available())})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Account < out[j].Account })
	web.JSON(w, http.StatusOK, map[string]any{"accounts": out})
}
