package appliance

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/julienschmidt/httprouter"

	"holon.dev/holon"
	"holon.dev/holon/appliance/auth"
	"holon.dev/holon/appliance/origin"
	"holon.dev/holon/appliance/web"
	"holon.dev/holon/webui"
)

// consoleBackend is the console's way to the gateway: every page reads and
// writes through the API's own router and handlers, as the session's
// principal, so a page and an API call share their rules.
type consoleBackend struct{ a *api }

// routeConsole mounts the console at /console, sends browsers asking for
// "/" there, and adds the two API routes only the console needed: the
// mandates of a dev gateway, and the store's health for the operator.
func (a *api) routeConsole() {
	c, err := webui.New(consoleBackend{a}, a.log)
	if err != nil {
		panic(fmt.Sprintf("console templates: %v", err)) // embedded files: a build defect
	}
	for _, m := range []string{"GET", "HEAD", "POST"} {
		a.router.Handler(m, webui.Prefix+"/*page", c)
	}
	a.router.GET("/", func(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
		if strings.Contains(r.Header.Get("Accept"), "text/html") {
			http.Redirect(w, r, webui.Prefix+"/", http.StatusSeeOther)
			return
		}
		web.Answer(w, holon.Errorf(holon.CodeNotFound, "no route GET /: the API is under /v0, the console under /console"))
	})
	if a.hosted == nil {
		a.handle("GET", "/v0/mandates", auth.Anyone, a.devMandates)
	}
	a.handle("GET", "/v0/admin/health", auth.Operator, a.storeHealth)
	spec, err := webui.OpenAPI()
	if err != nil {
		panic(err) // an embedded file: a build defect
	}
	a.router.GET(webui.OpenAPIPath, func(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		_, _ = w.Write(spec)
	})
}

func (b consoleBackend) Hosted() bool { return b.a.hosted != nil }

// Origin is the gateway's origin rule, the API's own.
func (b consoleBackend) Origin() *origin.Rule { return b.a.origin }

// GitHubSignIn is true only when a GitHub app is configured: the sign-in
// routes always exist (they answer 503 github_not_configured otherwise).
func (b consoleBackend) GitHubSignIn() bool {
	return b.a.hosted != nil && b.a.hosted.github != nil
}

func (b consoleBackend) Viewer(r *http.Request) (webui.Viewer, error) {
	p, err := b.a.sessionPrincipal(r)
	if err != nil || p == nil {
		return webui.Viewer{}, err
	}
	return viewerOf(p), nil
}

func viewerOf(p *auth.Principal) webui.Viewer {
	switch p.Kind {
	case auth.KindDev:
		return webui.Viewer{Kind: webui.ViewerDev}
	case auth.KindAdmin:
		return webui.Viewer{Kind: webui.ViewerAdmin}
	}
	return webui.Viewer{Kind: webui.ViewerHuman, Account: p.Account}
}

func (b consoleBackend) SignIn(w http.ResponseWriter, r *http.Request, key string) (webui.Viewer, error) {
	p, err := b.a.startSession(w, r, key)
	if err != nil {
		return webui.Viewer{}, apiError(err)
	}
	return viewerOf(p), nil
}

func (b consoleBackend) SignOut(w http.ResponseWriter, r *http.Request) error {
	return b.a.endSession(w, r)
}

// Do serves one API request in-process through the front door (its NUL,
// host and body checks, its log line), the router, the route's access
// rule and the handler, exactly as for a request from outside, with the
// session's principal (nobody when none). The rate limits are not
// charged again: the page's own request was counted.
func (b consoleBackend) Do(r *http.Request, method, path string, body, out any) error {
	var rd io.Reader = http.NoBody
	if body != nil {
		raw, err := json.Marshal(body)
		if err != nil {
			return fmt.Errorf("console request body: %w", err)
		}
		rd = bytes.NewReader(raw)
	}
	return b.Send(r, method, path, "application/json", rd, out)
}

// Send is Do with a body as it is (a file, a YAML manifest), of the given
// media type. Its length is unknown to the handler, which reads it
// under its own limits as it would a request's.
func (b consoleBackend) Send(r *http.Request, method, path, contentType string, body io.Reader, out any) error {
	p, err := b.a.sessionPrincipal(r)
	if err != nil {
		return err
	}
	if p == nil {
		p = auth.Nobody()
	}
	ctx := auth.WithPrincipal(r.Context(), p)
	req, err := http.NewRequestWithContext(ctx, method, path, body)
	if err != nil {
		return fmt.Errorf("console request %s %s: %w", method, path, err)
	}
	if req.ContentLength == 0 && body != http.NoBody {
		req.ContentLength = -1 // a stream: its length is unknown
	}
	req.RemoteAddr = r.RemoteAddr
	// The browser's origin, for what is built from it (the OAuth issuer).
	req.Host, req.TLS = r.Host, r.TLS
	if p := r.Header.Get("X-Forwarded-Proto"); p != "" {
		req.Header.Set("X-Forwarded-Proto", p)
	}
	if xff := r.Header.Get("X-Forwarded-For"); xff != "" {
		req.Header.Set("X-Forwarded-For", xff)
	}
	req.Header.Set("Content-Type", contentType)
	rec := &recorder{header: http.Header{}, code: http.StatusOK}
	b.a.ServeHTTP(rec, req) // the front door, as a request from outside
	if rec.code/100 != 2 {
		var eb web.ErrorBody
		if err := json.Unmarshal(rec.body.Bytes(), &eb); err != nil || eb.Error == nil {
			return fmt.Errorf("console request %s %s: status %d", method, path, rec.code)
		}
		if out != nil {
			// A call that ran and failed still has its receipt.
			_ = json.Unmarshal(rec.body.Bytes(), out)
		}
		return &webui.APIError{Status: rec.code, Err: eb.Error}
	}
	if out == nil {
		return nil
	}
	if w, ok := out.(*bytes.Buffer); ok {
		_, err := w.Write(rec.body.Bytes())
		return err
	}
	if err := json.Unmarshal(rec.body.Bytes(), out); err != nil {
		return fmt.Errorf("console request %s %s: decode: %w", method, path, err)
	}
	return nil
}

// apiError turns an error of this package into the API answer it would be
// (the status from the gateway's table). An internal error stays as it is:
// the console logs it and shows a page that tells nothing of it.
func apiError(err error) error {
	if ge, status, internal := web.Public(err); !internal {
		return &webui.APIError{Status: status, Err: ge}
	}
	return err
}

// recorder is the response of an in-process request.
type recorder struct {
	header http.Header
	code   int
	wrote  bool
	body   bytes.Buffer
}

func (r *recorder) Header() http.Header { return r.header }

func (r *recorder) WriteHeader(code int) {
	if !r.wrote {
		r.code, r.wrote = code, true
	}
}

func (r *recorder) Write(b []byte) (int, error) {
	r.WriteHeader(http.StatusOK)
	return r.body.Write(b)
}
