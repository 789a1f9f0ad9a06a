// Package origin is the gateway's one rule for "is this request https, and
// what is our origin": the public URL (HOLON_PUBLIC_URL) when there is
// one; else the request itself, its scheme read from its own connection
// and, only behind a trusted proxy (HOLON_TRUST_PROXY=1), from the
// proxy's X-Forwarded-Proto. A header a client can write never decides
// it otherwise. CSRF checks, sign-in (its callback and cookies), the
// OAuth issuer, the front door's Host and Origin checks and the links
// the gateway hands out all ask this rule.
//
// It is a leaf: it imports nothing of the project, so every room, the
// console (webui) included, may import it.
package origin

import (
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
)

// Rule answers what the gateway's own origin is for a request. Its zero
// value is a gateway without a public URL and without a trusted proxy.
type Rule struct {
	base       string // the public URL without a trailing slash, or ""
	public     string // its origin (Of), or ""
	host       string // its host name (HostName), or ""
	trustProxy bool
}

// New is the rule of a gateway whose public URL is publicURL ("" when it
// has none) and that trusts the X-Forwarded-* headers only when
// trustProxy says a proxy of its own sets them.
func New(publicURL string, trustProxy bool) *Rule {
	r := &Rule{trustProxy: trustProxy}
	if o := Of(publicURL); o != "" {
		r.base, r.public = strings.TrimRight(publicURL, "/"), o
		u, _ := url.Parse(o)
		r.host = HostName(u.Host)
	}
	return r
}

// PublicHost is the host name of the public URL, or "" when there is none.
func (r *Rule) PublicHost() string { return r.host }

// scheme is how the request reached the gateway: https over its own TLS,
// or behind a trusted proxy that says so.
func (r *Rule) scheme(req *http.Request) string {
	if req.TLS != nil || (r.trustProxy && strings.EqualFold(strings.TrimSpace(lastValue(req.Header, "X-Forwarded-Proto")), "https")) {
		return "https"
	}
	return "http"
}

// Base is the URL the gateway's links start with: the public URL, or
// else the origin the request was sent to. Append a path ("/console").
func (r *Rule) Base(req *http.Request) string {
	if r.base != "" {
		return r.base
	}
	return r.scheme(req) + "://" + req.Host
}

// Origin is the gateway's origin in the form browsers send it (Of): the
// public URL's, or else the one the request was sent to.
func (r *Rule) Origin(req *http.Request) string {
	if r.public != "" {
		return r.public
	}
	return Of(r.scheme(req) + "://" + req.Host)
}

// HTTPS reports whether the browser reaches the gateway over https (its
// cookies are then Secure): the public URL's scheme, or else the
// request's own connection or a trusted proxy's word.
func (r *Rule) HTTPS(req *http.Request) bool {
	return strings.HasPrefix(r.Origin(req), "https://")
}

// SameOrigin reports whether origin (an Origin header) is the gateway's
// own: Origin, or, for a request that names the gateway by a loopback
// name, the origin it was sent to (a browser on the gateway's machine).
func (r *Rule) SameOrigin(req *http.Request, origin string) bool {
	o := Of(origin)
	if o == "" {
		return false
	}
	if o == r.Origin(req) {
		return true
	}
	return IsLoopbackName(HostName(req.Host)) && o == Of(r.scheme(req)+"://"+req.Host)
}

// KnownHost reports whether the request names the gateway by a loopback
// name or by its public URL's host: the only names a gateway without
// authentication answers to.
func (r *Rule) KnownHost(req *http.Request) bool {
	host := HostName(req.Host)
	return IsLoopbackName(host) || (r.host != "" && host == r.host)
}

// Of is an origin in the form browsers send it (scheme://host[:port],
// lowercase, without the scheme's default port), or "" when s is none.
func Of(s string) string {
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

// HostName is the name of a Host header, without port or brackets, in
// lowercase and without a final dot.
func HostName(hostport string) string {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	return strings.TrimSuffix(strings.ToLower(strings.Trim(host, "[]")), ".")
}

// IsLoopbackName reports whether a host name (no port) is this machine's
// own: localhost, or a loopback address.
func IsLoopbackName(host string) bool {
	if host == "localhost" {
		return true
	}
	a, err := netip.ParseAddr(host)
	return err == nil && a.Unmap().IsLoopback()
}

// IsLoopbackOrigin reports whether an origin (Of's form) names this
// machine (http://localhost:6274, say: a local inspector's page).
func IsLoopbackOrigin(origin string) bool {
	u, err := url.Parse(Of(origin))
	return err == nil && u.Host != "" && IsLoopbackName(HostName(u.Host))
}

// lastValue is a header's last value, after its last comma: the entry
// the nearest proxy wrote (earlier ones are whatever the client sent).
func lastValue(h http.Header, name string) string {
	vs := h.Values(name)
	if len(vs) == 0 {
		return ""
	}
	v := vs[len(vs)-1]
	if i := strings.LastIndexByte(v, ','); i >= 0 {
		v = v[i+1:]
	}
	return v
}
