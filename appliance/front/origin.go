package front

import (
	"fmt"
	"net/http"

	"holon.dev/holon"
	"holon.dev/holon/appliance/origin"
)

// Which names and origins the gateway answers (the one rule of what the
// gateway's origin is: appliance/origin). A gateway without
// authentication (dev mode) answers, on every route, only a request whose
// Host is a loopback name or the host of its public URL: a web page whose
// name is made to resolve to 127.0.0.1 (DNS rebinding) is refused before
// it can read a balance or send a form. /mcp, on every gateway, refuses a
// request whose Origin is present and is not the gateway's own (nor, in
// dev mode, a loopback origin such as a local inspector's); a client that
// is not a browser sends no Origin and is not concerned.

// Error codes of the front door's name and origin checks.
const (
	// CodeHostNotAllowed: a gateway without authentication was asked by a
	// name that is neither loopback nor its public URL's host (421).
	CodeHostNotAllowed = "host_not_allowed"
	// CodeOriginNotAllowed: a request to /mcp came from a web page of
	// another origin (403).
	CodeOriginNotAllowed = "origin_not_allowed"
)

// CheckHost is the dev gateway's rule for every route: the request must
// name the gateway by a loopback name or by the host of its public URL.
func (d *Door) CheckHost(r *http.Request) error {
	if d.cfg.Origin.KnownHost(r) {
		return nil
	}
	public := ""
	if h := d.cfg.Origin.PublicHost(); h != "" {
		public = ", " + h
	}
	return holon.Errorf(CodeHostNotAllowed, "this gateway runs without authentication and answers only to localhost, 127.0.0.1 and [::1]%s, not to %q "+
		"(a web page whose name points here must not drive it): open it by one of those names, or set HOLON_PUBLIC_URL to the URL you open it by", public, r.Host)
}

// checkMCPOrigin refuses a request to /mcp from a web page of another
// origin: an absent Origin (a client that is not a browser) passes; a
// present one must be the gateway's own, or in dev mode a loopback origin.
func (d *Door) checkMCPOrigin(r *http.Request) error {
	o := r.Header.Get("Origin")
	if o == "" {
		return nil
	}
	if got := origin.Of(o); got != "" && got == d.cfg.Origin.Origin(r) {
		return nil
	}
	if !d.cfg.Hosted && origin.IsLoopbackOrigin(o) {
		return nil
	}
	mode := ""
	if !d.cfg.Hosted {
		mode = " or a loopback origin (http://localhost:<port>)"
	}
	return holon.Errorf(CodeOriginNotAllowed, "/mcp does not answer web pages of other origins: the request came from %s, and only %s%s may call it; "+
		"a client that is not a browser sends no Origin header", fmt.Sprintf("%q", o), d.cfg.Origin.Origin(r), mode)
}
