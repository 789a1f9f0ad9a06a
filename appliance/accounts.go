package appliance

import (
	"errors"
	"fmt"
	"net/http"
	"net/mail"
	"strings"
	"time"

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

// account is a hosted account (holon.BucketUsers, by handle). Its money is
// the journal account of the same name.
type account struct {
	Handle  string    `json:"handle"`
	Email   string    `json:"email"`
	Created time.Time `json:"created"`
	// Mandates are the root mandates the account issued, oldest first.
	Mandates []string      `json:"mandates"`
	Disabled *disabledMark `json:"disabled,omitempty"`
	// GitHub is the GitHub account linked by signing in (publishing needs it).
	GitHub *wire.GitHubLink `json:"github,omitempty"`
	// Claimed is set when a GitHub sign-in that proved the account's
	// email took the account over from its unproved signup (signin.go).
	Claimed *wire.Claim `json:"claimed,omitempty"`
}

// disabledMark says when and why the operator disabled an account.
type disabledMark struct {
	At     time.Time `json:"at"`
	Reason string    `json:"reason"`
}

// emailRecord maps a normalized email to its account (holon.BucketEmails):
// one account per email, and a disabled account's email stays barred.
type emailRecord struct {
	Handle   string `json:"handle"`
	Disabled bool   `json:"disabled,omitempty"`
}

// reservedHandles would collect other people's money or pass for the
// platform: the platform's own names, the project's names, and the words a
// visitor would take for an official account. The registry's author
// namespaces are reserved besides, and any handle starting with "holon-".
var reservedHandles = map[string]bool{
	// The platform's accounts and names.
	"holon": true, "external": true, "platform": true, "gateway": true, "operator": true,
	"holon-labs": true, "holonlabs": true, "holon-dev": true, "holondev": true, "holon-hq": true,
	// Roles and services.
	"admin": true, "administrator": true, "root": true, "system": true, "sysadmin": true,
	"support": true, "security": true, "billing": true, "payments": true, "help": true,
	"status": true, "staff": true, "team": true, "official": true, "moderator": true,
	"moderation": true, "abuse": true, "legal": true, "privacy": true, "terms": true,
	"compliance": true, "trust": true, "safety": true, "sales": true, "contact": true,
	"info": true, "noreply": true, "no-reply": true, "postmaster": true, "hostmaster": true,
	"webmaster": true, "mail": true, "email": true,
	// Parts of the site and the API.
	"api": true, "www": true, "app": true, "console": true, "docs": true, "blog": true,
	"static": true, "assets": true, "cdn": true, "mcp": true, "healthz": true, "v0": true,
	"v1": true, "auth": true, "oauth": true, "login": true, "logout": true, "signup": true,
	"signin": true, "register": true, "account": true, "accounts": true, "me": true,
	"settings": true, "keys": true, "agents": true, "catalog": true, "catalogue": true,
	"files": true, "demo": true, "mandates": true, "receipts": true, "approvals": true,
	"github": true, "anthropic": true, "claude": true, "openai": true,
	// Words that mean nobody.
	"null": true, "nil": true, "none": true, "undefined": true, "anonymous": true,
	"unknown": true, "test": true, "example": true,
}

// checkHandle applies the handle rules: 2 to 39 characters with the
// syntax of GitHub logins, lowercase, not reserved and not the namespace
// of an agent author in the registry.
func (h *hosted) checkHandle(handle string) error {
	rules := "2 to 39 lowercase letters, digits and single hyphens, not starting or ending with a hyphen (like a GitHub login)"
	switch {
	case handle == "":
		return holon.Errorf(CodeInvalidHandle, "handle is required: %s", rules)
	case strings.ToLower(handle) != handle && contract.ValidHandle(strings.ToLower(handle)):
		return holon.Errorf(CodeInvalidHandle, "handles are lowercase: use %q", strings.ToLower(handle))
	case !contract.ValidHandle(handle):
		return holon.Errorf(CodeInvalidHandle, "%q is not a handle: %s", handle, rules)
	case reservedHandles[handle] || strings.HasPrefix(handle, "holon-") || h.authors[handle]:
		return holon.Errorf(CodeHandleTaken, "the handle %q is reserved: pick another", handle)
	}
	return nil
}

// normalizeEmail lowercases and checks an address: one bare address
// (no name, no angle brackets), at most 254 characters, a dotted domain.
func normalizeEmail(s string) (string, error) {
	e := strings.ToLower(strings.TrimSpace(s))
	if e == "" {
		return "", holon.Errorf(CodeInvalidEmail, "email is required")
	}
	addr, err := mail.ParseAddress(e)
	_, domain, _ := strings.Cut(e, "@")
	if err != nil || addr.Address != e || addr.Name != "" || len(e) > 254 ||
		!strings.Contains(domain, ".") || strings.HasPrefix(domain, ".") || strings.HasSuffix(domain, ".") {
		return "", holon.Errorf(CodeInvalidEmail, "%q is not an email address such as ada@example.com", s)
	}
	return e, nil
}

// accountMandates lists an account's root mandates.
func (h *hosted) accountMandates(handle string) ([]string, error) {
	var acct account
	err := h.store.View(func(tx holon.Tx) error { return tx.Get(holon.BucketUsers, handle, &acct) })
	if err != nil {
		return nil, fmt.Errorf("account %s: %w", handle, err)
	}
	return acct.Mandates, nil
}

// drawKey draws a key and builds its record.
func (h *hosted) drawKey(kind, handle, mandate string, ask bool) (string, *auth.Key, error) {
	key, err := token.NewKey(h.rand, kind)
	if err != nil {
		return "", nil, err
	}
	return key, &auth.Key{
		Prefix: token.Prefix(key), Kind: kind, Account: handle, Mandate: mandate, Ask: ask,
		Created: h.now().UTC(), Hash: token.Hash(key),
	}, nil
}

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
func (a *api) signup(w http.ResponseWriter, r *http.Request, _ httprouter.Params, _ *auth.Principal) {
	h := a.hosted
	var body signupBody
	if err := web.DecodeBody(r, &body); err != nil {
		a.fail(w, r, err)
		return
	}
	if err := h.checkHandle(body.Handle); err != nil {
		a.fail(w, r, err)
		return
	}
	email, err := normalizeEmail(body.Email)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	if ok, wait := h.limits.signup.Allow(web.ClientAddr(r, h.limits.trustProxy)); !ok {
		a.tooMany(w, r, wait, "your address (signups)")
		return
	}
	ans, err := h.createAccount(r, body.Handle, email)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	w.Header().Set("Cache-Control", "no-store")
	web.JSON(w, http.StatusCreated, ans)
}

func (h *hosted) createAccount(r *http.Request, handle, email string) (*signupAnswer, error) {
	sandbox := h.starterMandate(handle)
	for attempt := 0; ; attempt++ {
		humanKey, human, err := h.drawKey(token.KindHuman, handle, "", false)
		if err != nil {
			return nil, err
		}
		agentKey, agent, err := h.drawKey(token.KindAgent, handle, sandbox.ID, true)
		if err != nil {
			return nil, err
		}
		err = h.store.Update(r.Context(), func(tx holon.Tx) error {
			if err := h.putNewAccount(tx, account{Handle: handle, Email: email}); err != nil {
				return err
			}
			if err := putKey(tx, human); err != nil {
				return err
			}
			return putKey(tx, agent)
		})
		if errors.Is(err, errKeyCollision) && attempt < 3 {
			continue
		}
		if err != nil {
			return nil, err
		}
		return &signupAnswer{
			Handle: handle, Email: email, HumanKey: humanKey, AgentKey: agentKey,
			Mandate: sandbox.ID, Credit: h.engine.SignupCredit(),
			Note: "Keys are shown once, now: store them. The human key decides approvals; the agent key acts under " + sandbox.ID + " only.",
		}, nil
	}
}

// putNewAccount stores a new account (handle, email and, from a GitHub
// sign-in, its link), its email, and its starter mandate with the signup
// credit, refusing a handle or an email already taken.
func (h *hosted) putNewAccount(tx holon.Tx, acct account) error {
	if err := handleFree(tx, acct.Handle); err != nil {
		return err
	}
	var er emailRecord
	switch err := tx.Get(holon.BucketEmails, acct.Email, &er); {
	case err == nil && er.Disabled:
		return holon.Errorf(CodeEmailDisabled, "this email belongs to a disabled account and cannot sign up again")
	case err == nil:
		return holon.Errorf(CodeEmailTaken, "this email has an account already: use its keys")
	case !errors.Is(err, holon.ErrNotFound):
		return err
	}
	sandbox := h.starterMandate(acct.Handle)
	acct.Created, acct.Mandates = h.now().UTC(), []string{sandbox.ID}
	if err := tx.Put(holon.BucketUsers, acct.Handle, acct); err != nil {
		return err
	}
	if err := tx.Put(holon.BucketEmails, acct.Email, emailRecord{Handle: acct.Handle}); err != nil {
		return err
	}
	return h.engine.PutMandateTx(tx, sandbox)
}

// handleFree refuses a handle that has an account, money or mandates
// already (an operator's mandates directory can name accounts that never
// signed up: their money is not up for grabs).
func handleFree(tx holon.Tx, handle string) error {
	taken := holon.Errorf(CodeHandleTaken, "the handle %q is taken: pick another", handle)
	var acct account
	if err := tx.Get(holon.BucketUsers, handle, &acct); err == nil {
		return taken
	} else if !errors.Is(err, holon.ErrNotFound) {
		return err
	}
	if tx.HasEntry("signup:" + handle) {
		return taken
	}
	bal, err := tx.Account(handle)
	if err != nil {
		return err
	}
	if bal != (holon.Account{}) {
		return taken
	}
	if _, err := tx.Mandate(handle + "/sandbox"); err == nil {
		return taken
	}
	return nil
}

// me is GET /v0/me: for a human key the account, its balance, mandates
// and live keys (by prefix); for an agent key its own key and mandate with
// its budget.
func (a *api) me(w http.ResponseWriter, r *http.Request, _ httprouter.Params, p *auth.Principal) {
	h := a.hosted
	var acct account
	var keys []*auth.Key
	var bal holon.Account
	err := h.store.View(func(tx holon.Tx) error {
		if err := tx.Get(holon.BucketUsers, p.Account, &acct); err != nil {
			return err
		}
		var err error
		if keys, err = accountKeys(tx, p.Account); err != nil {
			return err
		}
		bal, err = tx.Account(p.Account)
		return err
	})
	if err != nil {
		a.fail(w, r, err)
		return
	}
	ans := wire.Me{Kind: p.Kind, Handle: acct.Handle}
	if p.Kind == token.KindAgent {
		kw := p.Key.View()
		ans.Key = &kw
		st, err := a.engine.Mandate(p.Mandate)
		if err != nil {
			a.fail(w, r, err)
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
		st, err := a.engine.Mandate(id)
		if err != nil {
			a.fail(w, r, err)
			return
		}
		ans.Mandates = append(ans.Mandates, st)
	}
	ans.Keys = []wire.KeyView{}
	now := h.now()
	for _, k := range keys {
		if k.Live(now) {
			ans.Keys = append(ans.Keys, k.View())
		}
	}
	web.JSON(w, http.StatusOK, ans)
}
