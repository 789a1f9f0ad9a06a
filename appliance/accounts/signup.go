package accounts

import (
	"net/http"

	"github.com/julienschmidt/httprouter"

	"holon.dev/holon"
	"holon.dev/holon/appliance/auth"
	"holon.dev/holon/appliance/token"
	"holon.dev/holon/appliance/web"
	"holon.dev/holon/appliance/wire"
	"holon.dev/holon/gateway"
	"holon.dev/holon/journal"
)

type signupBody struct {
	Handle string `json:"handle"`
	Email  string `json:"email"`
}

// signupAnswer carries the account's keys: the only time they are shown.
type signupAnswer struct {
	Handle   string         `json:"handle"`
	Email    string         `json:"email"`
	HumanKey string         `json:"human_key"`
	AgentKey string         `json:"agent_key"`
	Mandate  string         `json:"mandate"`
	Credit   journal.Amount `json:"credit"`
	Note     string         `json:"note"`
}

// signup creates an account (POST /v0/signup): the account, its email, a
// human key, an agent key (ask_in_client) bound to the starter mandate
// <handle>/sandbox, and the demo credit, all in one transaction.
func (h *handlers) signup(w http.ResponseWriter, r *http.Request, _ httprouter.Params, _ *auth.Principal) {
	var body signupBody
	if err := web.DecodeBody(r, &body); err != nil {
		h.fail(w, r, err)
		return
	}
	if err := h.repo.CheckHandle(body.Handle); err != nil {
		h.fail(w, r, err)
		return
	}
	email, err := NormalizeEmail(body.Email)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	if ok, wait := h.signups.Allow(web.ClientAddr(r, h.trustProxy)); !ok {
		web.TooMany(h.log, w, r, wait, "your address (signups)")
		return
	}
	ans, err := h.createAccount(r, body.Handle, email)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	w.Header().Set("Cache-Control", "no-store")
	web.JSON(w, http.StatusCreated, ans)
}

func (h *handlers) createAccount(r *http.Request, handle, email string) (*signupAnswer, error) {
	sandbox := h.repo.StarterMandate(handle)
	var humanKey, agentKey string
	err := h.repo.Update(r.Context(), func(tx holon.Tx) error {
		var human, agent *auth.Key
		var err error
		if humanKey, human, err = h.repo.DrawKey(token.KindHuman, handle, "", false); err != nil {
			return err
		}
		if agentKey, agent, err = h.repo.DrawKey(token.KindAgent, handle, sandbox.ID, true); err != nil {
			return err
		}
		if err := h.repo.Create(tx, Account{Handle: handle, Email: email}); err != nil {
			return err
		}
		if err := PutKey(tx, human); err != nil {
			return err
		}
		return PutKey(tx, agent)
	})
	if err != nil {
		return nil, err
	}
	return &signupAnswer{
		Handle: handle, Email: email, HumanKey: humanKey, AgentKey: agentKey,
		Mandate: sandbox.ID, Credit: h.engine.SignupCredit(),
		Note: "Keys are shown once, now: store them. The human key decides approvals; the agent key acts under " + sandbox.ID + " only.",
	}, nil
}

// me is GET /v0/me: for a human key the account, its balance, mandates
// and live keys (by prefix); for an agent key its own key and mandate with
// its budget.
func (h *handlers) me(w http.ResponseWriter, r *http.Request, _ httprouter.Params, p *auth.Principal) {
	var acct *Account
	var keys []*auth.Key
	var bal holon.Account
	err := h.repo.View(func(tx holon.Tx) error {
		var err error
		if acct, err = Get(tx, p.Account); err != nil {
			return err
		}
		if keys, err = Keys(tx, p.Account); err != nil {
			return err
		}
		bal, err = tx.Account(p.Account)
		return err
	})
	if err != nil {
		h.fail(w, r, err)
		return
	}
	ans := wire.Me{Kind: p.Kind, Handle: acct.Handle}
	if p.Kind == token.KindAgent {
		kw := p.Key.View()
		ans.Key = &kw
		st, err := h.engine.Mandate(p.Mandate)
		if err != nil {
			h.fail(w, r, err)
			return
		}
		ans.Mandate = st
		web.JSON(w, http.StatusOK, ans)
		return
	}
	created := acct.Created
	ans.Email, ans.Created, ans.GitHub, ans.Claimed = acct.Email, &created, acct.GitHub, acct.Claimed
	ans.Balance = &wire.AccountView{Account: acct.Handle, Balance: wire.Money(bal.Balance), Held: wire.Money(bal.Held), Available: wire.Money(bal.Available())}
	ans.Mandates = []*gateway.MandateState{}
	for _, id := range acct.Mandates {
		st, err := h.engine.Mandate(id)
		if err != nil {
			h.fail(w, r, err)
			return
		}
		ans.Mandates = append(ans.Mandates, st)
	}
	ans.Keys = []wire.KeyView{}
	now := h.repo.now()
	for _, k := range keys {
		if k.Live(now) {
			ans.Keys = append(ans.Keys, k.View())
		}
	}
	web.JSON(w, http.StatusOK, ans)
}
