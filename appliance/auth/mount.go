package auth

import (
	"log/slog"
	"net/http"
	"strings"

	"github.com/julienschmidt/httprouter"

	"holon.dev/holon"
	"holon.dev/holon/appliance/ratelimit"
	"holon.dev/holon/appliance/web"
)

// Handler is an endpoint that knows who is asking.
type Handler func(w http.ResponseWriter, r *http.Request, ps httprouter.Params, p *Principal)

// Tagger is what the front door's response writer implements to learn a
// request's principal, for its log line.
type Tagger interface{ Tag(p *Principal) }

// Mount registers endpoints behind authentication, each with its access
// rule and the account's rate limit, on the router every room shares.
type Mount struct {
	Router *web.Router
	Chain  *Chain
	Log    *slog.Logger
	// Accounts limits the requests of one account, all its keys together
	// (nil: no limit, a dev gateway).
	Accounts ratelimit.Limiter
	// Challenge, when set, adds the WWW-Authenticate header of a refusal
	// for want of a credential: err is nil when none was sent, else why
	// the one sent was refused.
	Challenge func(w http.ResponseWriter, r *http.Request, err error)
}

// Handle registers an endpoint behind authentication, its access rule and
// the account's rate limit.
func (m *Mount) Handle(method, path string, acc Access, h Handler) {
	what := method + " " + strings.NewReplacer(":ns", "{ns}", ":name", "{name}", ":id", "{id}", ":prefix", "{prefix}", ":handle", "{handle}").Replace(path)
	m.Router.Handle(method, path, func(w http.ResponseWriter, r *http.Request, ps httprouter.Params) {
		p, err := m.Chain.Authenticate(r)
		if err != nil {
			m.challenge(w, r, err)
			web.Fail(m.Log, w, r, err)
			return
		}
		if t, ok := w.(Tagger); ok {
			t.Tag(p)
		}
		if !p.May(acc) {
			if p.Kind == KindNone {
				m.challenge(w, r, nil)
				web.Fail(m.Log, w, r, holon.Errorf(web.CodeUnauthenticated, "%s needs %s: send it as Authorization: Bearer <key>", what, acc.Describe()))
			} else {
				web.Fail(m.Log, w, r, holon.Errorf(web.CodeForbidden, "%s needs %s; this request carries %s", what, acc.Describe(), p.Describe()))
			}
			return
		}
		if m.Accounts != nil && p.Account != "" && !InProcess(r.Context()) {
			if ok, wait := m.Accounts.Allow(p.Account); !ok {
				web.TooMany(m.Log, w, r, wait, "this account (all its keys together)")
				return
			}
		}
		h(w, r, ps, p)
	})
}

func (m *Mount) challenge(w http.ResponseWriter, r *http.Request, err error) {
	if m.Challenge != nil {
		m.Challenge(w, r, err)
	}
}
