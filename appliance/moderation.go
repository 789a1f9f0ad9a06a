package appliance

import (
	"encoding/hex"
	"encoding/json"
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

// Moderation actions, as the log names them.
const (
	actionCredit  = "credit"
	actionDisable = "disable"
	actionYank    = "yank"
)

// maxReason bounds a moderation reason.
const maxReason = 1000

// modEntry is one operator action in the moderation log (holon.BucketModLog,
// append-only): what was done, to whom, why and when.
type modEntry struct {
	Seq    uint64    `json:"seq"`
	Time   time.Time `json:"time"`
	Actor  string    `json:"actor"`
	Action string    `json:"action"`
	// Target is an account handle or an agent version (ns/name@version).
	Target string          `json:"target"`
	Reason string          `json:"reason"`
	Amount *journal.Amount `json:"amount,omitempty"`
	// Entry is the journal key of a credit (admin-credit:<uuid>).
	Entry string `json:"entry,omitempty"`
	// Agents are the versions a disable yanked with the account.
	Agents []string `json:"agents,omitempty"`
}

// yankRecord marks an agent version withdrawn by the operator
// (holon.BucketSettings, "yanked/<ns/name@version>"). Start-up skips it, so a
// yank outlives restarts whatever the version's source.
type yankRecord struct {
	Ref    string    `json:"ref"`
	Reason string    `json:"reason"`
	Time   time.Time `json:"time"`
}

func yankKey(ref string) string { return "yanked/" + ref }

// yankedRefs lists the versions the operator withdrew.
func yankedRefs(store holon.Store) ([]string, error) {
	var refs []string
	err := store.View(func(tx holon.Tx) error {
		return tx.ForEach(holon.BucketSettings, "yanked/", func(k string, _ json.RawMessage) (bool, error) {
			refs = append(refs, strings.TrimPrefix(k, "yanked/"))
			return true, nil
		})
	})
	return refs, err
}

func checkReason(reason string) error {
	reason = strings.TrimSpace(reason)
	switch {
	case reason == "":
		return holon.Errorf(holon.CodeInvalidRequest, "reason is required: the moderation log keeps why each action was taken")
	case len(reason) > maxReason:
		return holon.Errorf(holon.CodeInvalidRequest, "reason is longer than %d characters", maxReason)
	}
	return nil
}

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
func (a *api) adminCredit(w http.ResponseWriter, r *http.Request, _ httprouter.Params, _ *auth.Principal) {
	h := a.hosted
	var body creditBody
	if err := web.DecodeBody(r, &body); err != nil {
		a.fail(w, r, err)
		return
	}
	switch {
	case body.Account == "":
		a.fail(w, r, holon.Errorf(holon.CodeInvalidRequest, "account is required: the handle to credit"))
		return
	case body.Amount == nil || *body.Amount <= 0:
		a.fail(w, r, holon.Errorf(holon.CodeInvalidRequest, `amount is required: a positive decimal string such as "5.00"`))
		return
	}
	reason := strings.TrimSpace(body.Reason)
	if reason == "" {
		reason = "demo credit"
	} else if err := checkReason(reason); err != nil {
		a.fail(w, r, err)
		return
	}
	id, err := newUUID(h.rand)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	key := "admin-credit:" + id
	var bal holon.Account
	err = h.store.Update(r.Context(), func(tx holon.Tx) error {
		var acct account
		if err := tx.Get(holon.BucketUsers, body.Account, &acct); errors.Is(err, holon.ErrNotFound) {
			return web.NotFound("no account %s", body.Account)
		} else if err != nil {
			return err
		}
		if _, err := h.engine.CreditTx(tx, key, body.Account, *body.Amount); err != nil {
			return err
		}
		amt := *body.Amount
		if _, err := tx.Append(holon.BucketModLog, modEntry{Time: h.now().UTC(), Actor: auth.KindAdmin, Action: actionCredit,
			Target: body.Account, Reason: reason, Amount: &amt, Entry: key}); err != nil {
			return err
		}
		var err error
		bal, err = tx.Account(body.Account)
		return err
	})
	if err != nil {
		a.fail(w, r, err)
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
func (a *api) adminDisable(w http.ResponseWriter, r *http.Request, ps httprouter.Params, _ *auth.Principal) {
	h := a.hosted
	handle := ps.ByName("handle")
	var body disableBody
	if err := web.DecodeBody(r, &body); err != nil {
		a.fail(w, r, err)
		return
	}
	if err := checkReason(body.Reason); err != nil {
		a.fail(w, r, err)
		return
	}
	reason := strings.TrimSpace(body.Reason)
	var yank []string
	if body.YankAgents {
		for _, v := range a.engine.Registry().Latest() {
			if v.Manifest.NS() != handle {
				continue
			}
			for _, x := range a.engine.Registry().Versions(v.Manifest.ID) {
				if !x.Shipped {
					yank = append(yank, x.Manifest.Ref())
				}
			}
		}
	}
	now := h.now().UTC()
	revoked := 0
	err := h.store.Update(r.Context(), func(tx holon.Tx) error {
		revoked = 0
		var acct account
		if err := tx.Get(holon.BucketUsers, handle, &acct); errors.Is(err, holon.ErrNotFound) {
			return web.NotFound("no account %s", handle)
		} else if err != nil {
			return err
		}
		if acct.Disabled != nil {
			return holon.Errorf(CodeAccountDisabled, "%s was disabled already, at %s", handle, acct.Disabled.At.Format(time.RFC3339))
		}
		acct.Disabled = &disabledMark{At: now, Reason: reason}
		if err := tx.Put(holon.BucketUsers, handle, acct); err != nil {
			return err
		}
		if err := tx.Put(holon.BucketEmails, acct.Email, emailRecord{Handle: handle, Disabled: true}); err != nil {
			return err
		}
		var err error
		if revoked, err = revokeLiveKeys(tx, handle, now); err != nil {
			return err
		}
		if _, err := tx.Append(holon.BucketModLog, modEntry{Time: now, Actor: auth.KindAdmin, Action: actionDisable,
			Target: handle, Reason: reason, Agents: yank}); err != nil {
			return err
		}
		for _, ref := range yank {
			if err := putYank(tx, ref, "account "+handle+" disabled: "+reason, now); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		a.fail(w, r, err)
		return
	}
	for _, ref := range yank {
		a.engine.Registry().Remove(ref)
	}
	if yank == nil {
		yank = []string{}
	}
	web.JSON(w, http.StatusOK, map[string]any{"account": handle, "disabled": now, "reason": reason,
		"keys_revoked": revoked, "yanked": yank})
}

// putYank records a yank and logs it.
func putYank(tx holon.Tx, ref, reason string, now time.Time) error {
	if err := tx.Put(holon.BucketSettings, yankKey(ref), yankRecord{Ref: ref, Reason: reason, Time: now}); err != nil {
		return err
	}
	_, err := tx.Append(holon.BucketModLog, modEntry{Time: now, Actor: auth.KindAdmin, Action: actionYank, Target: ref, Reason: reason})
	return err
}

type yankBody struct {
	Reason string `json:"reason"`
}

// adminYank is POST /v0/admin/agents/{ns}/{name}@{version}/yank: the
// version stops being listed and resolved, for good (its number stays
// taken). Shipped agents change with the code, not this way.
func (a *api) adminYank(w http.ResponseWriter, r *http.Request, ps httprouter.Params, _ *auth.Principal) {
	h := a.hosted
	ref := ps.ByName("ns") + "/" + ps.ByName("name")
	var body yankBody
	if err := web.DecodeBody(r, &body); err != nil {
		a.fail(w, r, err)
		return
	}
	if !strings.Contains(ref, "@") {
		a.fail(w, r, holon.Errorf(holon.CodeInvalidRequest, "name the exact version: /v0/admin/agents/%s@<version>/yank", ref))
		return
	}
	if err := checkReason(body.Reason); err != nil {
		a.fail(w, r, err)
		return
	}
	reason := strings.TrimSpace(body.Reason)
	v, ok := a.engine.Registry().Get(ref)
	if !ok {
		var yr yankRecord
		if err := h.store.View(func(tx holon.Tx) error { return tx.Get(holon.BucketSettings, yankKey(ref), &yr) }); err == nil {
			a.fail(w, r, holon.Errorf(CodeAlreadyYanked, "%s was yanked already, at %s", ref, yr.Time.Format(time.RFC3339)))
			return
		}
		a.fail(w, r, web.NotFound("no agent version %s is listed", ref))
		return
	}
	if v.Shipped {
		a.fail(w, r, holon.Errorf(CodeShippedAgent, "%s ships with the gateway and changes with its code: remove it from HOLON_REGISTRY instead", ref))
		return
	}
	now := h.now().UTC()
	err := h.store.Update(r.Context(), func(tx holon.Tx) error {
		var yr yankRecord
		if err := tx.Get(holon.BucketSettings, yankKey(ref), &yr); err == nil {
			return holon.Errorf(CodeAlreadyYanked, "%s was yanked already", ref)
		}
		return putYank(tx, ref, reason, now)
	})
	if err != nil {
		a.fail(w, r, err)
		return
	}
	a.engine.Registry().Remove(ref)
	web.JSON(w, http.StatusOK, map[string]any{"agent": ref, "yanked": now, "reason": reason})
}

// adminAccountView is an account as the operator sees it.
type adminAccountView struct {
	Handle   string         `json:"handle"`
	Email    string         `json:"email"`
	Created  time.Time      `json:"created"`
	Disabled *disabledMark  `json:"disabled"`
	Mandates []string       `json:"mandates"`
	Balance  journal.Amount `json:"balance"`
	Held     journal.Amount `json:"held"`
}

// adminAccounts is GET /v0/admin/accounts?q=&limit=: accounts whose handle
// or email contains q, by handle.
func (a *api) adminAccounts(w http.ResponseWriter, r *http.Request, _ httprouter.Params, _ *auth.Principal) {
	q := strings.ToLower(r.URL.Query().Get("q"))
	limit, err := web.Limit(r, 100, 1000)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	out := []adminAccountView{}
	err = a.hosted.store.View(func(tx holon.Tx) error {
		return tx.ForEach(holon.BucketUsers, "", func(_ string, raw json.RawMessage) (bool, error) {
			var acct account
			if err := json.Unmarshal(raw, &acct); err != nil {
				return false, err
			}
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
		a.fail(w, r, err)
		return
	}
	web.JSON(w, http.StatusOK, map[string]any{"accounts": out})
}

// adminLog is GET /v0/admin/log?after=&limit=: the moderation log, oldest
// first, from the entry after seq `after`; with order=newest, newest
// first, from the entry before seq `before` (the newest when absent), as
// the operator reads it. next is the cursor of the following page ("" at
// the end): after= of the next page oldest first, before= newest first.
func (a *api) adminLog(w http.ResponseWriter, r *http.Request, _ httprouter.Params, _ *auth.Principal) {
	limit, err := web.Limit(r, 100, 1000)
	if err != nil {
		a.fail(w, r, err)
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
			a.fail(w, r, holon.Errorf(holon.CodeInvalidRequest, "%s must be the seq of a log entry", name))
			return 0, false
		}
		return n, true
	}
	var page modLogPage
	switch q.Get("order") {
	case "", "oldest":
		after, ok := seqParam("after")
		if !ok {
			return
		}
		err = a.hosted.store.View(func(tx holon.Tx) error { page, err = modLogAfter(tx, after, limit); return err })
	case "newest":
		before, ok := seqParam("before")
		if !ok {
			return
		}
		err = a.hosted.store.View(func(tx holon.Tx) error { page, err = modLogBefore(tx, before, limit); return err })
	default:
		a.fail(w, r, holon.Errorf(holon.CodeInvalidRequest, "order is oldest (the default) or newest"))
		return
	}
	if err != nil {
		a.fail(w, r, err)
		return
	}
	web.JSON(w, http.StatusOK, page)
}
