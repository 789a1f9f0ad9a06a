package appliance

import (
	"holon.dev/holon/appliance/console"
	"holon.dev/holon/appliance/signin"
)

// routeConsole mounts the console's backend (appliance/console): its
// pages' requests go in-process through this API's front door, as the
// principal of the browser's console session (appliance/signin's; on a
// dev gateway, everyone is the dev principal).
func (a *api) routeConsole() {
	var sessions console.Sessions = signin.Dev{}
	if a.hosted != nil {
		sessions = a.signin // mounted with the hosted routes, before this
	}
	b, err := console.New(console.Config{
		Front: a, Sessions: sessions, Origin: a.origin,
		Hosted: a.hosted != nil, GitHubSignIn: a.hosted != nil && a.signin.GitHubSignIn(),
		Engine: a.engine, MandateStates: a.mandateStates, Log: a.log,
	})
	if err != nil {
		panic(err) // embedded templates: a build defect
	}
	b.Mount(a.mount)
}
