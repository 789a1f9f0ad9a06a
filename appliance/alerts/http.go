package alerts

import (
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"strings"

	"github.com/julienschmidt/httprouter"

	"holon.dev/holon"
	"holon.dev/holon/appliance/auth"
	"holon.dev/holon/appliance/web"
	"holon.dev/holon/appliance/wire"
	"holon.dev/holon/gateway"
)

// The routes, each behind its principals:
//
//	GET    /v0/alerts                   human or agent key: the alerts of the mandates it sees (?mandate=, ?limit=)
//	GET    /v0/mandates/{ns}/{name}/alerts   human or agent key
//	GET    /v0/me/webhook               human key: the account's webhook
//	PUT    /v0/me/webhook               human key: set it ({"url": …}), with a new secret shown once
//	DELETE /v0/me/webhook               human key
//
// On a dev gateway, which has no accounts, the webhook routes name the
// account: ?account=<handle>.

// AlertsPage is the most GET /v0/alerts lists at once, and its default.
const AlertsPage = 100

type handlers struct {
	s      *Service
	engine *gateway.Engine
	log    *slog.Logger
}

// Mount registers the routes; engine reads the mandates.
func (s *Service) Mount(m *auth.Mount, engine *gateway.Engine) {
	h := &handlers{s: s, engine: engine, log: s.log}
	m.Handle("GET", "/v0/alerts", auth.Human|auth.Agent, h.list)
	m.Handle("GET", "/v0/mandates/:ns/:name/alerts", auth.Human|auth.Agent, h.ofMandate)
	m.Handle("GET", "/v0/me/webhook", auth.Human, h.getWebhook)
	m.Handle("PUT", "/v0/me/webhook", auth.Human, h.putWebhook)
	m.Handle("DELETE", "/v0/me/webhook", auth.Human, h.deleteWebhook)
}

func (h *handlers) fail(w http.ResponseWriter, r *http.Request, err error) {
	web.Fail(h.log, w, r, err)
}

func (h *handlers) ofMandate(w http.ResponseWriter, r *http.Request, ps httprouter.Params, p *auth.Principal) {
	h.answer(w, r, p, ps.ByName("ns")+"/"+ps.ByName("name"))
}

func (h *handlers) list(w http.ResponseWriter, r *http.Request, _ httprouter.Params, p *auth.Principal) {
	id := r.URL.Query().Get("mandate")
	if id == "" && p.Kind == auth.KindAgent {
		id = p.Mandate
	}
	h.answer(w, r, p, id)
}

// answer lists the alerts of mandate id, or ("") of every mandate the
// principal sees, newest first.
func (h *handlers) answer(w http.ResponseWriter, r *http.Request, p *auth.Principal, id string) {
	limit, err := web.Limit(r, AlertsPage, AlertsPage*10)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	if id != "" && !p.SeesMandate(id) {
		h.fail(w, r, web.NotFound("no mandate %s", id))
		return
	}
	var as []*holon.Alert
	if id != "" {
		as, err = h.engine.Alerts(id)
	} else {
		as, err = h.s.alertsUnder(p.Account)
	}
	if err != nil {
		h.fail(w, r, err)
		return
	}
	if len(as) > limit {
		as = as[:limit]
	}
	out, err := h.s.Views(as)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	web.JSON(w, http.StatusOK, wire.Alerts{Alerts: out})
}

// alertsUnder reads the alerts of every mandate in an account's
// namespace ("" on a dev gateway: every alert), newest first.
func (s *Service) alertsUnder(account string) ([]*holon.Alert, error) {
	prefix := ""
	if account != "" {
		prefix = account + "/"
	}
	var out []*holon.Alert
	err := s.store.View(func(tx holon.Tx) error {
		return tx.ForEach(holon.BucketAlerts, prefix, func(key string, raw json.RawMessage) (bool, error) {
			a := new(holon.Alert)
			if err := json.Unmarshal(raw, a); err != nil {
				return false, err
			}
			out = append(out, a)
			return true, nil
		})
	})
	holon.SortAlerts(out)
	return out, err
}

// Views are alerts with what became of their deliveries.
func (s *Service) Views(as []*holon.Alert) ([]wire.AlertView, error) {
	out := make([]wire.AlertView, 0, len(as))
	err := s.store.View(func(tx holon.Tx) error {
		for _, a := range as {
			v := wire.AlertView{Alert: a}
			d, ok, err := holon.DeliveryOf(tx, a.ID)
			if err != nil {
				return err
			}
			if ok {
				v.Delivery = &wire.DeliveryView{Status: d.Status, Attempts: d.Attempts, LastError: d.LastError, Done: d.Done}
				if d.Status == holon.DeliveryPending {
					next := d.Next
					v.Delivery.Next = &next
				}
			}
			out = append(out, v)
		}
		return nil
	})
	return out, err
}

// account is whose webhook a request means: the human key's account, or
// on a dev gateway the one named by ?account=.
func account(r *http.Request, p *auth.Principal) (string, error) {
	if p.Kind != auth.KindDev {
		return p.Account, nil
	}
	a := r.URL.Query().Get("account")
	if a == "" || strings.Contains(a, "/") {
		return "", holon.Errorf(holon.CodeInvalidRequest, "this dev gateway has no accounts: name the account whose webhook this is, ?account=<handle> (a mandate's issuer)")
	}
	return a, nil
}

func (h *handlers) getWebhook(w http.ResponseWriter, r *http.Request, _ httprouter.Params, p *auth.Principal) {
	acct, err := account(r, p)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	hook, err := h.s.Webhook(acct)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	web.JSON(w, http.StatusOK, view(hook, ""))
}

func (h *handlers) putWebhook(w http.ResponseWriter, r *http.Request, _ httprouter.Params, p *auth.Principal) {
	acct, err := account(r, p)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	var body struct {
		URL string `json:"url"`
	}
	if err := web.DecodeBody(r, &body); err != nil {
		h.fail(w, r, err)
		return
	}
	v, err := h.s.SetWebhook(r.Context(), acct, body.URL)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	w.Header().Set("Cache-Control", "no-store")
	web.JSON(w, http.StatusOK, v)
}

func (h *handlers) deleteWebhook(w http.ResponseWriter, r *http.Request, _ httprouter.Params, p *auth.Principal) {
	acct, err := account(r, p)
	if err == nil {
		err = h.s.DeleteWebhook(r.Context(), acct)
	}
	if err != nil && !errors.Is(err, holon.ErrNotFound) {
		h.fail(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}
