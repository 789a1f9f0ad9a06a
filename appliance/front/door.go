package front

import (
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"
	"unicode/utf8"

	"holon.dev/holon"
	"holon.dev/holon/appliance/auth"
	"holon.dev/holon/appliance/origin"
	"holon.dev/holon/appliance/ratelimit"
	"holon.dev/holon/appliance/token"
	"holon.dev/holon/appliance/web"
)

// Config is what the front door is made with.
type Config struct {
	// Routes serve a request once it passed the door.
	Routes http.Handler
	// Delegated serves a delegated call, and reports whether it did: it
	// is asked after the checks and before Routes, so that a delegation
	// token never meets API-key authentication (nil: none).
	Delegated func(w http.ResponseWriter, r *http.Request) bool
	// Origin is the one rule of the gateway's names and origin.
	Origin *origin.Rule
	// Hosted is a gateway with authentication: it logs each request and
	// limits each client address; a dev gateway checks the Host instead.
	Hosted bool
	// Address is the per-address rate limit of a hosted gateway.
	Address ratelimit.Limiter
	// TrustProxy reads the client's address from X-Forwarded-For.
	TrustProxy bool
	// Bodies are the body limits of the POST routes that take more than
	// web.MaxBody, by path.
	Bodies map[string]int64
	Log    *slog.Logger
}

// Door is the front door (the package doc): an http.Handler in front of
// every route.
type Door struct {
	cfg Config
}

// New returns the front door of cfg.Routes.
func New(cfg Config) *Door { return &Door{cfg: cfg} }

// statusWriter remembers the status and the principal of a request, for
// its log line.
type statusWriter struct {
	web.CodeWriter
	p *auth.Principal
}

// Tag is told the request's principal (auth.Tagger).
func (sw *statusWriter) Tag(p *auth.Principal) { sw.p = p }

// ServeHTTP is the front door: what every request goes through before its
// route, from outside or from a console page asking in-process: NUL
// characters in the path or query are refused, and a path or query that
// is not UTF-8 once decoded; a dev gateway answers only its own names and
// /mcp only its own origin (origin.go), the body is bounded, and on a
// hosted gateway the client address's rate limit applies (before any key
// is looked up) and one line is logged: never a key, a query string, an
// input or an output.
func (d *Door) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	sw := &statusWriter{CodeWriter: web.CodeWriter{ResponseWriter: w}}
	start := time.Now()
	addr := ""
	if d.cfg.Hosted {
		addr = web.ClientAddr(r, d.cfg.TrustProxy)
		defer func() {
			attrs := []any{"method", r.Method, "path", token.Redact(r.URL.Path), "status", sw.Code,
				"ms", time.Since(start).Milliseconds(), "addr", addr}
			if p := sw.p; p != nil {
				attrs = append(attrs, "principal", p.Kind)
				if p.Account != "" {
					attrs = append(attrs, "account", p.Account)
				}
				if p.Key != nil {
					attrs = append(attrs, "key", p.Key.Prefix)
				}
			}
			d.cfg.Log.Info("request", attrs...)
		}()
	}
	if strings.ContainsRune(r.URL.Path, 0) || strings.ContainsRune(r.URL.RawQuery, 0) ||
		strings.Contains(strings.ToLower(r.URL.RawQuery), "%00") {
		d.fail(sw, r, holon.Errorf(web.CodeNULCharacter, "NUL characters are not accepted in the path or query"))
		return
	}
	if notUTF8(r.URL) {
		// What the routes read from them (a mandate's name, a cursor)
		// reaches the store, which keeps text as UTF-8 (PostgreSQL refuses
		// anything else).
		d.fail(sw, r, holon.Errorf(holon.CodeInvalidRequest, "the path and query must be UTF-8 text once their %%-escapes are decoded"))
		return
	}
	if !d.cfg.Hosted {
		if err := d.CheckHost(r); err != nil {
			d.fail(sw, r, err)
			return
		}
	}
	if r.URL.Path == "/mcp" {
		if err := d.checkMCPOrigin(r); err != nil {
			d.fail(sw, r, err)
			return
		}
	}
	if r.Body != nil {
		r.Body = http.MaxBytesReader(sw, r.Body, d.bodyLimit(r))
	}
	// A console page's own requests (auth.InProcess) were counted once,
	// as the page's request: they are not extra requests of the address.
	if d.cfg.Hosted && !auth.InProcess(r.Context()) {
		if ok, wait := d.cfg.Address.Allow(addr); !ok {
			d.tooMany(sw, r, wait, "your address")
			return
		}
	}
	if d.cfg.Delegated != nil && d.cfg.Delegated(sw, r) {
		return
	}
	d.cfg.Routes.ServeHTTP(sw, r)
}

// fail answers with the status of the error's code (web.Fail).
func (d *Door) fail(w http.ResponseWriter, r *http.Request, err error) {
	web.Fail(d.cfg.Log, w, r, err)
}

// tooMany answers 429 with Retry-After.
func (d *Door) tooMany(w http.ResponseWriter, r *http.Request, wait time.Duration, who string) {
	ra := web.RetryAfter(wait)
	w.Header().Set("Retry-After", ra)
	d.fail(w, r, holon.Errorf(web.CodeRateLimited, "too many requests from %s: retry in %s s", who, ra))
}

// bodyLimit is the most a request body may hold: a POST to one of
// Config.Bodies' paths (a file upload: the file limit, and one byte more,
// so that the upload itself says what was too large) has its own; every
// other body's is web.MaxBody.
func (d *Door) bodyLimit(r *http.Request) int64 {
	if n, ok := d.cfg.Bodies[r.URL.Path]; ok && r.Method == http.MethodPost {
		return n
	}
	return web.MaxBody
}

// notUTF8 reports whether the path or the query of u, its %-escapes
// decoded, is not UTF-8 (a query that does not decode is the route's to
// refuse).
func notUTF8(u *url.URL) bool {
	if !utf8.ValidString(u.Path) {
		return true
	}
	q, err := url.QueryUnescape(u.RawQuery)
	return err == nil && !utf8.ValidString(q) || !utf8.ValidString(u.RawQuery)
}
