package appliance_test

import (
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"holon.dev/holon/appliance/web"
)

// Ensure that App.Routes lists every route the appliance answers, as the
// router serves it: each listed /v0 route is routed (a request to it is
// never the router's "no route"), and the routes of the hosted API and of
// the OAuth server are among them.
func TestApp_Routes(t *testing.T) {
	ta := newHostedApp(t)
	routes := ta.app.Routes()
	for _, want := range []web.Route{
		{Method: "GET", Path: "/v0/agents"},
		{Method: "POST", Path: "/v0/calls"},
		{Method: "GET", Path: "/v0/receipts/:id"},
		{Method: "POST", Path: "/v0/signup"},
		{Method: "DELETE", Path: "/v0/keys/:prefix"},
		{Method: "POST", Path: "/oauth/token"},
		{Method: "POST", Path: "/mcp"},
	} {
		if !slices.Contains(routes, want) {
			t.Errorf("Routes() has no %s %s", want.Method, want.Path)
		}
	}
	n := 0
	for _, r := range routes {
		if !strings.HasPrefix(r.Path, "/v0/") {
			continue
		}
		n++
		path := strings.NewReplacer(":ns", "x", ":name", "y", ":id", "z", ":prefix", "p", ":handle", "h").Replace(r.Path)
		w := httptest.NewRecorder()
		ta.app.Handler().ServeHTTP(w, httptest.NewRequest(r.Method, path, nil))
		if w.Code == http.StatusNotFound && strings.Contains(w.Body.String(), "no route") {
			t.Errorf("%s %s is listed but not routed: %d %s", r.Method, r.Path, w.Code, w.Body)
		}
	}
	if n < 30 {
		t.Errorf("Routes() lists %d routes under /v0, want every one (more than 30)", n)
	}
}
