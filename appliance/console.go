package appliance

import (
	"net/http"

	"holon.dev/holon/appliance/auth"
	"holon.dev/holon/appliance/console"
)

// routeConsole mounts the console's backend (appliance/console): its
// pages' requests go in-process through this API's front door, as the
// principal of the browser's console session.
func (a *api) routeConsole() {
	b, err := console.New(console.Config{
		Front: a, Sessions: consoleSessions{a}, Origin: a.origin,
		Hosted: a.hosted != nil, GitHubSignIn: a.hosted != nil && a.hosted.github != nil,
		Engine: a.engine, MandateStates: a.mandateStates, Log: a.log,
	})
	if err != nil {
		panic(err) // embedded templates: a build defect
	}
	b.Mount(a.mount)
}

// consoleSessions are the console sessions (console_session.go) as the
// console's backend sees them.
type consoleSessions struct{ a *api }

func (s consoleSessions) Principal(r *http.Request) (*auth.Principal, error) {
	return s.a.sessionPrincipal(r)
}

func (s consoleSessions) Start(w http.ResponseWriter, r *http.Request, key string) (*auth.Principal, error) {
	return s.a.startSession(w, r, key)
}

func (s consoleSessions) End(w http.ResponseWriter, r *http.Request) error {
	return s.a.endSession(w, r)
}
