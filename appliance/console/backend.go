package console

import (
	"fmt"
	"log/slog"
	"net/http"

	"holon.dev/holon/appliance/auth"
	"holon.dev/holon/appliance/origin"
	"holon.dev/holon/appliance/web"
	"holon.dev/holon/gateway"
	"holon.dev/holon/webui"
)

// Sessions are the console's sessions (appliance/signin's): who a
// browser's session belongs to, a sign-in with a pasted key, a sign-out.
type Sessions interface {
	// Principal is the principal of the request's session, nil when it
	// carries none (or one that ended); on a dev gateway, the dev
	// principal.
	Principal(r *http.Request) (*auth.Principal, error)
	// Start checks a key (a human key or the admin key) and starts a
	// session for it on w.
	Start(w http.ResponseWriter, r *http.Request, key string) (*auth.Principal, error)
	// End ends the request's session, if any.
	End(w http.ResponseWriter, r *http.Request) error
}

// Config is what the console's backend is wired with.
type Config struct {
	// Front is the gateway's front door: every in-process request of a
	// page is served by it, as one from outside.
	Front http.Handler
	// Sessions are the console sessions.
	Sessions Sessions
	// Origin is the gateway's one origin rule (the forms' CSRF check
	// and cookies follow it).
	Origin *origin.Rule
	// Hosted says the gateway has accounts; GitHubSignIn that a GitHub
	// app is configured.
	Hosted, GitHubSignIn bool
	// Engine serves the store's health and a dev gateway's mandates.
	Engine *gateway.Engine
	// MandateStates reads mandates with their budgets, in the order given.
	MandateStates func(ids []string) ([]*gateway.MandateState, error)
	// Log is where failures go.
	Log *slog.Logger
}

// Backend is the console's way to the gateway (webui.Backend).
type Backend struct {
	cfg     Config
	console *webui.Console
}

// New builds the console over its backend.
func New(cfg Config) (*Backend, error) {
	b := &Backend{cfg: cfg}
	c, err := webui.New(b, cfg.Log)
	if err != nil {
		return nil, fmt.Errorf("console templates: %w", err)
	}
	b.console = c
	return b, nil
}

// Hosted reports whether the gateway has accounts.
func (b *Backend) Hosted() bool { return b.cfg.Hosted }

// Origin is the gateway's origin rule, the API's own.
func (b *Backend) Origin() *origin.Rule { return b.cfg.Origin }

// GitHubSignIn is true only when a GitHub app is configured: the sign-in
// routes always exist (they answer 503 github_not_configured otherwise).
func (b *Backend) GitHubSignIn() bool { return b.cfg.GitHubSignIn }

// Viewer is who the request's console session belongs to.
func (b *Backend) Viewer(r *http.Request) (webui.Viewer, error) {
	p, err := b.cfg.Sessions.Principal(r)
	if err != nil || p == nil {
		return webui.Viewer{}, err
	}
	return viewerOf(p), nil
}

func viewerOf(p *auth.Principal) webui.Viewer {
	switch p.Kind {
	case auth.KindDev:
		return webui.Viewer{Kind: webui.ViewerDev}
	case auth.KindAdmin:
		return webui.Viewer{Kind: webui.ViewerAdmin}
	}
	return webui.Viewer{Kind: webui.ViewerHuman, Account: p.Account}
}

// SignIn checks a key and starts a session for it.
func (b *Backend) SignIn(w http.ResponseWriter, r *http.Request, key string) (webui.Viewer, error) {
	p, err := b.cfg.Sessions.Start(w, r, key)
	if err != nil {
		return webui.Viewer{}, apiError(err)
	}
	return viewerOf(p), nil
}

// SignOut ends the request's session.
func (b *Backend) SignOut(w http.ResponseWriter, r *http.Request) error {
	return b.cfg.Sessions.End(w, r)
}

// apiError turns an error of a room into the API answer it would be (the
// status from the gateway's table). An internal error stays as it is:
// the console logs it and shows a page that tells nothing of it.
func apiError(err error) error {
	if ge, status, internal := web.Public(err); !internal {
		return &webui.APIError{Status: status, Err: ge}
	}
	return err
}
