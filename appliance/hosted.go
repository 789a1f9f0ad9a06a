package appliance

import (
	"io"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"holon.dev/holon"
	"holon.dev/holon/appliance/accounts"
	"holon.dev/holon/appliance/auth"
	"holon.dev/holon/appliance/console"
	"holon.dev/holon/appliance/files"
	"holon.dev/holon/appliance/github"
	"holon.dev/holon/appliance/token"
	"holon.dev/holon/appliance/web"
	"holon.dev/holon/gateway"
	"holon.dev/holon/gateway/remote"
)

// hosted is what a hosted gateway adds to the API: accounts, keys,
// principals, rate limits and moderation (gateway.md §7).
type hosted struct {
	store  holon.Store
	engine *gateway.Engine
	log    *slog.Logger
	now    func() time.Time
	rand   io.Reader
	// adminKey is the SHA-256 of HOLON_ADMIN_KEY; nil: no operator.
	adminKey []byte
	limits   *limiters
	// accounts keeps accounts, keys, mandates and moderation.
	accounts *accounts.Repo

	// Sign-in (App.initSignIn): github is nil when no GitHub app is
	// configured.
	github *github.Client
	// publicURL is HOLON_PUBLIC_URL without a trailing slash: the base of
	// sign-in's redirect to the console (the rest asks the origin rule,
	// api.origin).
	publicURL string
	guard     remote.NetGuard
}

func newHosted(cfg Config, store holon.Store, engine *gateway.Engine, log *slog.Logger, now func() time.Time, rand io.Reader, authors map[string]bool, shipped []string) *hosted {
	h := &hosted{
		store: store, engine: engine, log: log, now: now, rand: rand,
		limits: newLimiters(cfg.Limits, cfg.TrustProxy != nil && *cfg.TrustProxy, now, store),
		accounts: accounts.New(accounts.Config{Store: store, Engine: engine, Now: now, Rand: rand,
			Authors: authors, Shipped: shipped, FX: cfg.PlatformFX}),
		// The OAuth issuer.
		publicURL: cfg.PublicURL,
	}
	if cfg.AdminKey != "" {
		h.adminKey = token.Sum(cfg.AdminKey)
	}
	return h
}

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
// characters in the path or query are refused, a dev gateway answers only
// its own names and /mcp only its own origin (origin.go), the body is
// bounded, and on
// a hosted gateway the client address's rate limit applies (before any
// key is looked up) and one line is logged: never a key, a query string,
// an input or an output.
func (a *api) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	sw := &statusWriter{CodeWriter: web.CodeWriter{ResponseWriter: w}}
	start := time.Now()
	addr := ""
	if a.hosted != nil {
		addr = web.ClientAddr(r, a.hosted.limits.trustProxy)
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
			a.log.Info("request", attrs...)
		}()
	}
	if strings.ContainsRune(r.URL.Path, 0) || strings.ContainsRune(r.URL.RawQuery, 0) ||
		strings.Contains(strings.ToLower(r.URL.RawQuery), "%00") {
		a.fail(sw, r, holon.Errorf(web.CodeNULCharacter, "NUL characters are not accepted in the path or query"))
		return
	}
	if a.hosted == nil {
		if err := a.checkHost(r); err != nil {
			a.fail(sw, r, err)
			return
		}
	}
	if r.URL.Path == "/mcp" {
		if err := a.checkMCPOrigin(r); err != nil {
			a.fail(sw, r, err)
			return
		}
	}
	if r.Body != nil {
		r.Body = http.MaxBytesReader(sw, r.Body, bodyLimit(r))
	}
	// A console page's own requests (auth.InProcess) were counted once,
	// as the page's request: they are not extra requests of the address.
	if a.hosted != nil && !auth.InProcess(r.Context()) {
		if ok, wait := a.hosted.limits.address.Allow(addr); !ok {
			a.tooMany(sw, r, wait, "your address")
			return
		}
	}
	if a.v0.ServeDelegated(sw, r) {
		return
	}
	a.router.ServeHTTP(sw, r)
}

// tooMany answers 429 with Retry-After.
func (a *api) tooMany(w http.ResponseWriter, r *http.Request, wait time.Duration, who string) {
	ra := web.RetryAfter(wait)
	w.Header().Set("Retry-After", ra)
	a.fail(w, r, holon.Errorf(web.CodeRateLimited, "too many requests from %s: retry in %s s", who, ra))
}

// bodyLimit is the most a request body may hold: a file upload's limit is
// the file limit (and one byte more, so that the upload itself says what
// was too large); every other body's is web.MaxBody.
func bodyLimit(r *http.Request) int64 {
	if r.Method == http.MethodPost && r.URL.Path == "/v0/files" {
		return files.MaxFileSize + 1
	}
	if r.Method == http.MethodPost && r.URL.Path == console.UploadPath {
		return console.MaxUpload
	}
	return web.MaxBody
}
