package origin_test

import (
	"crypto/tls"
	"net/http/httptest"
	"testing"

	"holon.dev/holon/appliance/origin"
)

// Ensure that the gateway's origin is its public URL's when it has one,
// and else the request's, whose scheme an X-Forwarded-Proto header decides
// only behind a trusted proxy: a client that writes the header itself
// makes a plain-http gateway believe nothing.
func TestRule_TrustsForwardedProtoOnlyBehindAProxy(t *testing.T) {
	for _, tc := range []struct {
		name        string
		public      string
		trust, tls  bool
		xfp         string
		origin, url string
		https       bool
	}{
		{name: "plain http", origin: "http://gw.test:8080", url: "http://gw.test:8080/x"},
		{name: "own TLS", tls: true, origin: "https://gw.test:8080", url: "https://gw.test:8080/x", https: true},
		{name: "forged proto, no proxy", xfp: "https", origin: "http://gw.test:8080", url: "http://gw.test:8080/x"},
		{name: "trusted proxy says https", trust: true, xfp: "https", origin: "https://gw.test:8080", url: "https://gw.test:8080/x", https: true},
		{name: "trusted proxy says http", trust: true, xfp: "http", origin: "http://gw.test:8080", url: "http://gw.test:8080/x"},
		{name: "trusted proxy, the last entry counts", trust: true, xfp: "https, http", origin: "http://gw.test:8080", url: "http://gw.test:8080/x"},
		{name: "trusted proxy, no header", trust: true, origin: "http://gw.test:8080", url: "http://gw.test:8080/x"},
		{name: "public URL", public: "https://holon.example.com/", xfp: "http", origin: "https://holon.example.com", url: "https://holon.example.com/x", https: true},
		{name: "public URL, default port", public: "https://holon.example.com:443", trust: true, origin: "https://holon.example.com", url: "https://holon.example.com:443/x", https: true},
		{name: "public http URL, forged proto", public: "http://holon.test", xfp: "https", origin: "http://holon.test", url: "http://holon.test/x"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := origin.New(tc.public, tc.trust)
			req := httptest.NewRequest("GET", "http://gw.test:8080/x", nil)
			if tc.tls {
				req.TLS = &tls.ConnectionState{}
			}
			if tc.xfp != "" {
				req.Header.Set("X-Forwarded-Proto", tc.xfp)
			}
			if got := r.Origin(req); got != tc.origin {
				t.Errorf("Origin: %q, want %q", got, tc.origin)
			}
			if got := r.Base(req) + "/x"; got != tc.url {
				t.Errorf("Base: %q, want %q", got, tc.url)
			}
			if got := r.HTTPS(req); got != tc.https {
				t.Errorf("HTTPS: %v, want %v", got, tc.https)
			}
			if !r.SameOrigin(req, tc.origin) {
				t.Errorf("SameOrigin(%q) is false", tc.origin)
			}
		})
	}
}

// Ensure that an Origin header is the gateway's own only when it is the
// rule's origin (in any case, with or without the default port), or, for
// a request by a loopback name, the origin it was sent to.
func TestRule_SameOrigin(t *testing.T) {
	public := origin.New("https://holon.example.com", false)
	local := httptest.NewRequest("POST", "http://127.0.0.1:8080/console/signup", nil)
	remote := httptest.NewRequest("POST", "http://holon.example.com/console/signup", nil)
	for _, tc := range []struct {
		rule   *origin.Rule
		name   string
		req    bool // local
		origin string
		want   bool
	}{
		{public, "public", false, "https://holon.example.com", true},
		{public, "public, upper case, default port", false, "HTTPS://HOLON.example.com:443", true},
		{public, "public over http", false, "http://holon.example.com", false},
		{public, "another site", false, "https://evil.example", false},
		{public, "a loopback page, remote request", false, "http://127.0.0.1:8080", false},
		{public, "a loopback page, loopback request", true, "http://127.0.0.1:8080", true},
		{public, "another loopback port", true, "http://127.0.0.1:9090", false},
		{public, "null", false, "null", false},
		{origin.New("", false), "no public URL, its own host", true, "http://127.0.0.1:8080", true},
		{origin.New("", false), "no public URL, https claimed", true, "https://127.0.0.1:8080", false},
	} {
		req := remote
		if tc.req {
			req = local
		}
		if got := tc.rule.SameOrigin(req, tc.origin); got != tc.want {
			t.Errorf("%s: SameOrigin(%q) = %v, want %v", tc.name, tc.origin, got, tc.want)
		}
	}
}

// Ensure that the names a gateway without authentication answers are the
// loopback ones and its public URL's host, nothing that merely starts or
// ends like them.
func TestRule_KnownHost(t *testing.T) {
	r := origin.New("https://gw.example.com", false)
	for host, want := range map[string]bool{
		"localhost:8080": true, "LOCALHOST": true, "127.0.0.1:1": true, "127.0.0.2": true, "[::1]:3000": true,
		"gw.example.com": true, "GW.example.com.:443": true,
		"rebind.evil.example": false, "localhost.evil.example": false, "gw.example.com.evil.example": false, "": false,
	} {
		req := httptest.NewRequest("GET", "/", nil)
		req.Host = host
		if got := r.KnownHost(req); got != want {
			t.Errorf("KnownHost(%q) = %v, want %v", host, got, want)
		}
	}
	if r.PublicHost() != "gw.example.com" || origin.New("", true).PublicHost() != "" {
		t.Errorf("PublicHost: %q", r.PublicHost())
	}
}
