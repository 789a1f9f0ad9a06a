package appliance

import (
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"

	"holon.dev/holon"
)

// Which names and origins the gateway answers. A gateway without
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

// hostName is the name of a Host header, without port or brackets, in
// lowercase and without a final dot.
func hostName(hostport string) string {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	return strings.TrimSuffix(strings.ToLower(strings.Trim(host, "[]")), ".")
}

// isLoopbackName reports whether a host name (no port) is this machine's
// own: localhost, or a loopback address.
func isLoopbackName(host string) bool {
	if host == "localhost" {
		return true
	}
	a, err := netip.ParseAddr(host)
	return err == nil && a.Unmap().IsLoopback()
}

// checkHost is the dev gateway's rule for every route: the request must
// name the gateway by a loopback name or by the host of its public URL.
func checkHost(r *http.Request, publicURL string) error {
	host := hostName(r.Host)
	if isLoopbackName(host) {
		return nil
	}
	public := ""
	if u, err := url.Parse(publicURL); err == nil && u.Host != "" {
		public = hostName(u.Host)
		if host == public {
			return nil
		}
		public = ", " + public
	}
	return holon.Errorf(CodeHostNotAllowed, "this gateway runs without authentication and answers only to localhost, 127.0.0.1 and [::1]%s, not to %q "+
		"(a web page whose name points here must not drive it): open it by one of those names, or set HOLON_PUBLIC_URL to the URL you open it by", public, r.Host)
}

// originOf is an origin in the form browsers send it (scheme://host[:port],
// lowercase, without the scheme's default port), or "" when s is none.
func originOf(s string) string {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil {
		return ""
	}
	host := strings.ToLower(u.Host)
	if port := u.Port(); (u.Scheme == "http" && port == "80") || (u.Scheme == "https" && port == "443") {
		host = strings.TrimSuffix(host, ":"+port)
	}
	return u.Scheme + "://" + host
}

// ownOrigin is the gateway's origin: its public URL's, or else the one the
// request was sent to.
func (a *api) ownOrigin(r *http.Request) string {
	if o := originOf(a.publicURL); o != "" {
		return o
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return originOf(scheme + "://" + r.Host)
}

// checkMCPOrigin refuses a request to /mcp from a web page of another
// origin: an absent Origin (a client that is not a browser) passes; a
// present one must be the gateway's own, or in dev mode a loopback origin.
func (a *api) checkMCPOrigin(r *http.Request) error {
	o := r.Header.Get("Origin")
	if o == "" {
		return nil
	}
	got := originOf(o)
	if got != "" && got == a.ownOrigin(r) {
		return nil
	}
	if u, err := url.Parse(got); got != "" && err == nil && a.hosted == nil && isLoopbackName(hostName(u.Host)) {
		return nil
	}
	mode := ""
	if a.hosted == nil {
		mode = " or a loopback origin (http://localhost:<port>)"
	}
	return holon.Errorf(CodeOriginNotAllowed, "/mcp does not answer web pages of other origins: the request came from %s, and only %s%s may call it; "+
		"a client that is not a browser sends no Origin header", fmt.Sprintf("%q", o), a.ownOrigin(r), mode)
}
