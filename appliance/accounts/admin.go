package accounts

import (
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/julienschmidt/httprouter"

	"holon.dev/holon"
	"holon.dev/holon/appliance/auth"
	"holon.dev/holon/appliance/web"
	"holon.dev/holon/appliance/wire"
	"holon.dev/holon/journal"
)

// newUUID draws a random (version 4) UUID.
func newUUID(rand io.Reader) (string, error) {
	b := make([]byte, 16)
	if _, err := io.ReadFull(rand, b); err != nil {
		return "", fmt.Errorf("draw a uuid: %w", err)
	}
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b)
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:], nil
}

type creditBody struct {
	Account string          `json:"account"`
	Amount  *journal.Amount `json:"amount"`
	Reason  string          `json:"reason,omitempty"`
}

// adminCredit is POST /v0/admin/credit: demo credit to an account,
// journaled as admin-credit:<uuid> from external:demo-credit, logged.
func (h *handlers) adminCredit(w http.ResponseWriter, r *http.Request, _ httprouter.Params, _ *auth.Principal) {
	var body creditBody
	if err := web.DecodeBody(r, &body); err != nil {
		h.fail(w, r, err)
		return
	}
	switch {
	case body.Account == "":
		h.fail(w, r, holon.Errorf(holon.CodeInvalidRequest, "account is required: the handle to credit"))
		return
	case body.Amount == nil || *body.Amount <= 0:
		h.fail(w, r, holon.Errorf(holon.CodeInvalidRequest, `amount is required: a positive decimal string such as "5.00"`))
		return
	}
	reason := strings.TrimSpace(body.Reason)
	if reason == "" {
		reason = "demo credit"
	} else if err := checkReason(reason); err != nil {
		h.fail(w, r, err)
		return
	}
	id, err := newUUID(h.repo.rand)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	key := "admin-credit:" + id
	var bal holon.Account
	err = h.repo.Update(r.Context(), func(tx holon.Tx) error {
		if _, err := Get(tx, body.Account); errors.Is(err, holon.ErrNotFound) {
			return web.NotFound("no account %s", body.Account)
		} else if err != nil {
			return err
		}
		if _, err := h.engine.CreditTx(tx, key, body.Account, *body.Amount); err != nil {
			return err
		}
		amt := *body.Amount
		if err := AppendLog(tx, LogEntry{Time: h.repo.now().UTC(), Actor: auth.KindAdmin, Action: ActionCredit,
			Target: body.Account, Reason: reason, Amount: &amt, Entry: key}); err != nil {
			return err
		}
		var err error
		bal, err = tx.Account(body.Account)
		return err
	})
	if err != nil {
		h.fail(w, r, err)
		return
	}
	web.JSON(w, http.StatusOK, map[string]any{
		"account": body.Account, "amount": body.Amount, "entry": key,
		"balance": wire.AccountView{Account: body.Account, Balance: wire.Money(bal.Balance), Held: wire.Money(bal.Held), Available: wire.Money(bal.Available())},
	})
}

type disableBody struct {
	Reason     string `json:"reason"`
	YankAgents bool   `json:"yank_agents,omitempty"`
}

// adminDisable is POST /v0/admin/accounts/{handle}/disable: every key of
// the account is revoked at once, its email cannot sign up again, and with
// yank_agents its agent versions (not the shipped ones) stop being listed.
func (h *handlers) adminDisable(w http.ResponseWriter, r *http.Request, ps httprouter.Params, _ *auth.Principal) {
	handle := ps.ByName("handle")
	var body disableBody
	if err := web.DecodeBody(r, &body); err != nil {
		h.fail(w, r, err)
		return
	}
	if err := checkReason(body.Reason); err != nil {
		h.fail(w, r, err)
		return
	}
	reason := strings.TrimSpace(body.Reason)
	var yank []string
	if body.YankAgents {
		for _, v := range h.engine.Registry().Latest() {
			if v.Manifest.NS() != handle {
				continue
			}
			for _, x := range h.engine.Registry().Versions(v.Manifest.ID) {
				if !x.Shipped {
					yank = append(yank, x.Manifest.Ref())
				}
			}
		}
	}
	now := h.repo.now().UTC()
	revoked := 0
	err := h.repo.Update(r.Context(), func(tx holon.Tx) error {
		acct, err := Get(tx, handle)
		if errors.Is(err, holon.ErrNotFound) {
			return web.NotFound("no account %s", handle)
		} else if err != nil {
			return err
		}
		if acct.Disabled != nil {
			return holon.Errorf(CodeAlreadyDisabled, "%s was disabled already, at %s", handle, acct.Disabled.At.Format(time.RFC3339))
		}
		if revoked, err = Disable(tx, acct, reason, now); err != nil {
			return err
		}
		if err := AppendLog(tx, LogEntry{Time: now, Actor: auth.KindAdmin, Action: ActionDisable,
			Target: handle, Reason: reason, Agents: yank}); err != nil {
			return err
		}
		for _, ref := range yank {
			if err := PutYank(tx, ref, "account "+handle+" disabled: "+reason, now); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		h.fail(w, r, err)
		return
	}
	for _, ref := range yank {
		h.engine.Registry().Remove(ref)
	}
	if yank == nil {
		yank = []string{}
	}
	web.JSON(w, http.StatusOK, map[string]any{"account": handle, "disabled": now, "reason": reason,
		"keys_revoked": revoked, "yanked": yank})
}

type yankBody struct {
	Reason string `json:"reason"`
}

// adminYank is POST /v0/admin/agents/{ns}/{name}@{version}/yank: the
// version stops being listed and resolved, for good (its number stays
// taken). Shipped agents change with the code, not this way.
func (h *handlers) adminYank(w http.ResponseWriter, r *http.Request, ps httprouter.Params, _ *auth.Principal) {
	ref := ps.ByName("ns") + "/" + ps.ByName("name")
	var body yankBody
	if err := web.DecodeBody(r, &body); err != nil {
		h.fail(w, r, err)
		return
	}
	if !strings.Contains(ref, "@") {
		h.fail(w, r, holon.Errorf(holon.CodeInvalidRequest, "name the exact version: /v0/admin/agents/%s@<version>/yank", ref))
		return
	}
	if err := checkReason(body.Reason); err != nil {
		h.fail(w, r, err)
		return
	}
	reason := strings.TrimSpace(body.Reason)
	v, ok := h.engine.Registry().Get(ref)
	if !ok {
		var yr *Yank
		if err := h.repo.View(func(tx holon.Tx) error { var err error; yr, err = Yanked(tx, ref); return err }); err == nil {
			h.fail(w, r, holon.Errorf(CodeAlreadyYanked, "%s was yanked already, at %s", ref, yr.Time.Format(time.RFC3339)))
			return
		}
		h.fail(w, r, web.NotFound("no agent version %s is listed", ref))
		return
	}
	if v.Shipped {
		h.fail(w, r, holon.Errorf(CodeShippedAgent, "%s ships with the gateway and changes with its code: remove it from HOLON_REGISTRY instead", ref))
		return
	}
	now := h.repo.now().UTC()
	err := h.repo.Update(r.Context(), func(tx holon.Tx) error {
		if _, err := Yanked(tx, ref); err == nil {
			return holon.Errorf(CodeAlreadyYanked, "%s was yanked already", ref)
		}
		return PutYank(tx, ref, reason, now)
	})
	if err != nil {
		h.fail(w, r, err)
		return
	}
	h.engine.Registry().Remove(ref)
	web.JSON(w, http.StatusOK, map[string]any{"agent": ref, "yanked": now, "reason": reason})
}

// adminAccountView is an account as the operator sees it.
type adminAccountView struct {
	Handle   string         `json:"handle"`
	Email    string         `json:"email"`
	Created  time.Time      `json:"created"`
	Disabled *Disabled      `json:"disabled"`
	Mandates []string       `json:"mandates"`
	Balance  journal.Amount `json:"balance"`
	Held     journal.Amount `json:"held"`
}

// adminAccounts is GET /v0/admin/accounts?q=&limit=: accounts whose handle
// or email contains q, by handle.
func (h *handlers) adminAccounts(w http.ResponseWriter, r *http.Request, _ httprouter.Params, _ *auth.Principal) {
	q := strings.ToLower(r.URL.Query().Get("q"))
	limit, err := web.Limit(r, 100, 1000)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	out := []adminAccountView{}
	err = h.repo.View(func(tx holon.Tx) error {
		return Each(tx, func(acct *Account) (bool, error) {
			if q != "" && !strings.Contains(acct.Handle, q) && !strings.Contains(acct.Email, q) {
				return true, nil
			}
			bal, err := tx.Account(acct.Handle)
			if err != nil {
				return false, err
			}
			out = append(out, adminAccountView{Handle: acct.Handle, Email: acct.Email, Created: acct.Created,
				Disabled: acct.Disabled, Mandates: acct.Mandates, Balance: bal.Balance, Held: bal.Held})
			return len(out) < limit, nil
		})
	})
	if err != nil {
		h.fail(w, r, err)
		return
	}
	web.JSON(w, http.StatusOK, map[string]any{"accounts": out})
}

// adminLog is GET /v0/admin/log?after=&limit=: the moderation log, oldest
// first, from the entry after seq `after`; with order=newest, newest
// first, from the entry before seq `before` (the newest when absent), as
// the operator reads it. next is the cursor of the following page ("" at
// the end): after= of the next page oldest first, before= newest first.
func (h *handlers) adminLog(w http.ResponseWriter, r *http.Request, _ httprouter.Params, _ *auth.Principal) {
	limit, err := web.Limit(r, 100, 1000)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	q := r.URL.Query()
	seqParam := func(name string) (uint64, bool) {
		s := q.Get(name)
		if s == "" {
			return 0, true
		}
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			h.fail(w, r, holon.Errorf(holon.CodeInvalidRequest, "%s must be the seq of a log entry", name))
			return 0, false
		}
		return n, true
	}
	var page LogPage
	switch q.Get("order") {
	case "", "oldest":
		after, ok := seqParam("after")
		if !ok {
			return
		}
		err = h.repo.View(func(tx holon.Tx) error { page, err = modLogAfter(tx, after, limit); return err })
	case "newest":
		before, ok := seqParam("before")
		if !ok {
			return
		}
		err = h.repo.View(func(tx holon.Tx) error { page, err = modLogBefore(tx, before, limit); return err })
	default:
		h.fail(w, r, holon.Errorf(holon.CodeInvalidRequest, "order is oldest (the default) or newest"))
		return
	}
	if err != nil {
		h.fail(w, r, err)
		return
	}
	web.JSON(w, http.StatusOK, page)
}
