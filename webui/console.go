// Package webui is the console: the browser face of the gateway. Its pages
// are rendered on the server from html/template, its few scripts and its
// stylesheet are embedded and served under checksummed names, and every
// form carries a CSRF token. It never reads the store: each page asks the
// gateway's JSON API through a Backend, in-process and as the signed-in
// principal, so the console and the API share one set of rules.
package webui

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"

	"holon.dev/holon"
	"holon.dev/holon/appliance/origin"
)

// Prefix is where the console is mounted.
const Prefix = "/console"

// Backend is what the console needs from the appliance. Do is the only
// way to the gateway's state: the appliance serves it with the same
// handlers, principal checks and rate limits as the HTTP API.
type Backend interface {
	// Hosted reports whether the gateway has accounts (else it is a dev
	// gateway: no sign-in, everything visible).
	Hosted() bool
	// Origin is the gateway's one rule of its own origin and of https,
	// which the forms' CSRF checks and cookies follow.
	Origin() *origin.Rule
	// GitHubSignIn reports whether sign-in with GitHub is configured.
	GitHubSignIn() bool
	// Viewer is who the request's console session belongs to; the zero
	// Viewer when nobody is signed in.
	Viewer(r *http.Request) (Viewer, error)
	// Do sends one API request (path with its query) as the request's
	// signed-in principal, body encoded as JSON, and decodes the JSON
	// answer into out (when not nil). An answer that is not 2xx comes
	// back as an *APIError, its body still decoded into out (a call that
	// ran and failed has a receipt).
	Do(r *http.Request, method, path string, body, out any) error
	// Send is Do with a body sent as it is (a file, a YAML manifest), of
	// the given media type: the handler reads it under its own limits.
	Send(r *http.Request, method, path, contentType string, body io.Reader, out any) error
	// SignIn checks a key (human or admin) and starts a session for it on
	// w. The key itself is never stored nor sent back.
	SignIn(w http.ResponseWriter, r *http.Request, key string) (Viewer, error)
	// SignOut ends the request's session, if any.
	SignOut(w http.ResponseWriter, r *http.Request) error
}

// Viewer kinds.
const (
	ViewerDev   = "dev"
	ViewerHuman = "human"
	ViewerAdmin = "admin"
)

// Viewer is the principal a page is rendered for.
type Viewer struct {
	// Kind is ViewerDev, ViewerHuman, ViewerAdmin, or "" for nobody.
	Kind string
	// Account is a human's handle.
	Account string
}

// SignedIn reports whether someone is.
func (v Viewer) SignedIn() bool { return v.Kind != "" }

// Decides reports whether the viewer may create mandates and decide
// approvals (a human, or anyone on a dev gateway).
func (v Viewer) Decides() bool { return v.Kind == ViewerHuman || v.Kind == ViewerDev }

// Operator reports whether the viewer holds the admin key.
func (v Viewer) Operator() bool { return v.Kind == ViewerAdmin }

// APIError is an API answer that was not 2xx.
type APIError struct {
	Status int
	Err    *holon.Error
}

// Error is the API's code and message.
func (e *APIError) Error() string { return fmt.Sprintf("%d %s", e.Status, e.Err.Error()) }

// Unwrap gives the gateway error.
func (e *APIError) Unwrap() error { return e.Err }

// Console serves the console's pages.
type Console struct {
	b      Backend
	log    *slog.Logger
	mux    *http.ServeMux
	assets *assets
	pages  map[string]*page
	// manual renders the manual once, at its first request: rendering
	// every page is a sixth of the gateway's start-up CPU.
	manual func() (*manual, error)
}

// New builds the console over a backend.
func New(b Backend, log *slog.Logger) (*Console, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	c := &Console{b: b, log: log, mux: http.NewServeMux()}
	var err error
	if c.assets, err = loadAssets(); err != nil {
		return nil, err
	}
	if c.pages, err = c.loadPages(); err != nil {
		return nil, err
	}
	c.manual = sync.OnceValues(loadManual)
	c.routes()
	return c, nil
}

// ServeHTTP serves every console path, with the security headers.
func (c *Console) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Security-Policy", contentSecurityPolicy)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "same-origin")
	h.Set("Cross-Origin-Opener-Policy", "same-origin")
	c.mux.ServeHTTP(w, r)
}

// contentSecurityPolicy allows the gateway's own origin only, and no
// inline script or style.
const contentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; " +
	"connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"

func (c *Console) routes() {
	m := c.mux
	m.HandleFunc("GET "+Prefix+"/static/{name}", c.assets.serve)
	m.Handle("GET "+Prefix+"/{$}", c.page(c.overview))
	m.Handle("GET "+Prefix+"/signin", c.public(c.signinForm))
	m.Handle("POST "+Prefix+"/signin", c.public(c.signin))
	m.Handle("POST "+Prefix+"/signup", c.public(c.signup))
	m.Handle("POST "+Prefix+"/signout", c.public(c.signout))
	c.routePages()
	c.routeManual()
	m.HandleFunc(Prefix+"/", func(w http.ResponseWriter, r *http.Request) {
		c.render(w, r, Viewer{}, http.StatusNotFound, "error", errorPage{Title: "Not found", Message: "There is no page " + r.URL.Path + "."})
	})
}

// action is a page handler that knows who is asking.
type action func(w http.ResponseWriter, r *http.Request, v Viewer)

// page wraps an action that needs a signed-in viewer: nobody is sent to
// sign in, a bad form token is refused, an API error becomes an error page.
func (c *Console) page(a action) http.Handler {
	return c.wrap(a, true, false)
}

// public wraps an action open to anyone (signing in and up).
func (c *Console) public(a action) http.Handler {
	return c.wrap(a, false, false)
}

// upload wraps a page action that takes a multipart form (a file): its
// token is the form's first part, checked before the file is read; the
// action reads the rest with formParts. No other page takes multipart, so
// none buffers a file to parse its form.
func (c *Console) upload(a action) http.Handler {
	return c.wrap(a, true, true)
}

func (c *Console) wrap(a action, signedIn, multipart bool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		v, err := c.b.Viewer(r)
		if err != nil {
			c.fail(w, r, Viewer{}, err)
			return
		}
		if r.Method == http.MethodPost && isMultipart(r) {
			if !multipart {
				c.render(w, r, v, http.StatusUnsupportedMediaType, "error", errorPage{Title: "Not a file form", Message: "This form takes no file: send it from its page."})
				return
			}
			if r, err = checkMultipartCSRF(r, c.b.Origin()); err != nil {
				c.render(w, r, v, http.StatusForbidden, "error", errorPage{Title: "Form expired", Message: err.Error()})
				return
			}
		} else if r.Method == http.MethodPost {
			if err := CheckCSRF(r, c.b.Origin()); err != nil {
				c.render(w, r, v, http.StatusForbidden, "error", errorPage{Title: "Form expired", Message: err.Error()})
				return
			}
		}
		if signedIn && !v.SignedIn() {
			next := ""
			if r.Method == http.MethodGet {
				next = "?next=" + urlQueryEscape(r.URL.RequestURI())
			}
			http.Redirect(w, r, Prefix+"/signin"+next, http.StatusSeeOther)
			return
		}
		w.Header().Set("Cache-Control", "no-store")
		a(w, r, v)
	})
}

// fail renders an error: the API's own code and message (escaped like
// every text), the API's status.
func (c *Console) fail(w http.ResponseWriter, r *http.Request, v Viewer, err error) {
	var ae *APIError
	if errors.As(err, &ae) {
		c.render(w, r, v, ae.Status, "error", errorPage{Title: http.StatusText(ae.Status), Code: ae.Err.Code, Message: ae.Err.Msg})
		return
	}
	c.log.Error("console page failed", "path", r.URL.Path, "err", err)
	c.render(w, r, v, http.StatusInternalServerError, "error", errorPage{Title: "Something went wrong", Message: "The gateway could not answer; the operator's log has the details."})
}

type errorPage struct {
	Title, Code, Message string
}

// localPath keeps a "next" parameter only when it is a path of this
// gateway (the console, or a page such as an OAuth consent), so a sign-in
// never sends the browser elsewhere. It judges the path as the browser
// will read it: a browser drops tabs and newlines anywhere in a URL and
// control characters at its ends, and reads \ as /, so "/\t/evil.example"
// is "//evil.example", another origin. A path with any control character
// or backslash is refused; what is left must resolve to this origin.
func localPath(next string) string {
	for _, c := range next {
		if c < 0x20 || c == 0x7f || c == '\\' {
			return ""
		}
	}
	if !strings.HasPrefix(next, "/") || strings.HasPrefix(next, "//") {
		return ""
	}
	u, err := url.Parse(next)
	if err != nil || u.Scheme != "" || u.Host != "" || u.User != nil || u.Opaque != "" {
		return ""
	}
	if here := (&url.URL{Scheme: "https", Host: "gateway.invalid", Path: "/"}); here.ResolveReference(u).Host != here.Host {
		return ""
	}
	return next
}
