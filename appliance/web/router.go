package web

import (
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"

	"github.com/julienschmidt/httprouter"

	"holon.dev/holon"
	"holon.dev/holon/appliance/token"
)

// Route is one method and path a router serves, the path in the
// router's pattern syntax (/v0/agents/:ns/:name, /console/*page).
type Route struct {
	Method string
	Path   string
}

// Router is the registrar every room mounts its routes through: an
// httprouter.Router that records each route it is given, so that the
// composition root can list them all (Routes).
type Router struct {
	mux    *httprouter.Router
	routes []Route
}

// NewRouter returns an empty router.
func NewRouter() *Router { return &Router{mux: httprouter.New()} }

// Handle mounts h at method and path.
func (r *Router) Handle(method, path string, h httprouter.Handle) {
	r.routes = append(r.routes, Route{Method: method, Path: path})
	r.mux.Handle(method, path, h)
}

// Handler mounts an http.Handler at method and path.
func (r *Router) Handler(method, path string, h http.Handler) {
	r.routes = append(r.routes, Route{Method: method, Path: path})
	r.mux.Handler(method, path, h)
}

// GET is Handle("GET", …).
func (r *Router) GET(path string, h httprouter.Handle) { r.Handle(http.MethodGet, path, h) }

// HEAD is Handle("HEAD", …).
func (r *Router) HEAD(path string, h httprouter.Handle) { r.Handle(http.MethodHead, path, h) }

// POST is Handle("POST", …).
func (r *Router) POST(path string, h httprouter.Handle) { r.Handle(http.MethodPost, path, h) }

// OPTIONS is Handle("OPTIONS", …).
func (r *Router) OPTIONS(path string, h httprouter.Handle) { r.Handle(http.MethodOptions, path, h) }

// Fallbacks sets what answers a path with no route, a method the path
// does not take, and a handler that panicked.
func (r *Router) Fallbacks(notFound, notAllowed http.Handler, panicked func(http.ResponseWriter, *http.Request, any)) {
	r.mux.NotFound, r.mux.MethodNotAllowed, r.mux.PanicHandler = notFound, notAllowed, panicked
}

// AnswerUnrouted sets the gateway's fallbacks (Fallbacks): a path with
// no route is 404 not_found and a method the path does not take 405, each
// naming the request; a handler that panicked is 500 gateway_error,
// logged with its path. Secrets in the path are redacted in both.
func (r *Router) AnswerUnrouted(log *slog.Logger) {
	r.Fallbacks(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		Answer(w, holon.Errorf(holon.CodeNotFound, "no route %s %s", r.Method, token.Redact(r.URL.Path)))
	}), http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		MethodNotAllowed(w, "%s is not allowed on %s", r.Method, token.Redact(r.URL.Path))
	}), func(w http.ResponseWriter, r *http.Request, p any) {
		log.Error("handler panicked", "path", token.Redact(r.URL.Path), "panic", token.Redact(fmt.Sprint(p)))
		Answer(w, holon.Errorf(holon.CodeGatewayError, "internal error"))
	})
}

// ServeHTTP routes a request.
func (r *Router) ServeHTTP(w http.ResponseWriter, req *http.Request) { r.mux.ServeHTTP(w, req) }

// Routes lists every route mounted, by path then method.
func (r *Router) Routes() []Route {
	out := slices.Clone(r.routes)
	slices.SortFunc(out, func(a, b Route) int {
		if c := strings.Compare(a.Path, b.Path); c != 0 {
			return c
		}
		return strings.Compare(a.Method, b.Method)
	})
	return out
}
