// Package mcpserver is the MCP server for assistants: Streamable HTTP
// with stateful sessions on /mcp, each bound to the key that opened it,
// and the tools, which act under the key's mandate through the same
// engine calls as the HTTP API.
//
// It may import the domain (holon), journal, the engine (gateway and its
// contract), web, auth, token and wire; no other room.
package mcpserver

import (
	"context"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/julienschmidt/httprouter"
	mcpauth "github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"holon.dev/holon"
	"holon.dev/holon/appliance/auth"
	"holon.dev/holon/appliance/token"
	"holon.dev/holon/appliance/web"
	"holon.dev/holon/gateway"
)

// CodeShuttingDown: the gateway is shutting down and takes no new MCP
// requests; retry on the restarted gateway.
const CodeShuttingDown = "shutting_down"

// MCP server limits.
const (
	// mcpSessionIdle closes a session no request has used for this long
	// (clients that go away without DELETE).
	mcpSessionIdle = 24 * time.Hour
	// mcpSessionsPerOwner bounds the open sessions of one key (or, in dev
	// mode, of one mandate): a new one beyond it ends the oldest.
	mcpSessionsPerOwner = 16
	// mcpSweepEvery is how often open sessions are checked against their
	// key, so that a revoked key's sessions end even when idle.
	mcpSweepEvery = 2 * time.Second
	// mcpDrainGrace is how long a shutting-down gateway lets the last
	// answers reach their clients before it ends their sessions' streams
	// (a client that sees its stream end first may drop an answer it
	// has not read yet).
	mcpDrainGrace = 500 * time.Millisecond
	// mcpElicitTimeout is how long a call waits for the human to answer
	// an approval form; after it the approval stays pending.
	mcpElicitTimeout = 10 * time.Minute
)

// Server is the MCP server for assistants (spec/mcp.md): Streamable
// HTTP with stateful sessions on /mcp. Every HTTP request is
// authenticated on its own (api.handle), so a revoked key's sessions stop
// at its next request; the SDK binds each session to the key that opened
// it, so no other key can use it; and every tool acts under the key's
// mandate through the same engine calls as the HTTP API.
//
// In dev mode (no --hosted) there are no keys: /mcp acts under the mandate
// its URL names, /mcp?mandate=<id>, and asks in the client for approvals
// (the dev gateway lets anyone decide them anyway).
type Server struct {
	engine *gateway.Engine
	// keyLive tells whether a key, by its hash, still authenticates.
	keyLive func(hash string) (bool, error)
	server  *mcp.Server
	// tools adds the tools to server before its first request: compiling
	// their schemas is a tenth of the gateway's start-up CPU, which a
	// gateway nobody calls over MCP need not spend.
	tools   sync.Once
	handler http.Handler
	// stateless serves the revisions without sessions (2026-07-28,
	// mcp_revisions.go); stateKey seals their approvals' request states
	// (the same key on every gateway of the store, and across restarts).
	stateless http.Handler
	stateKey  []byte
	log       *slog.Logger

	// stop is cancelled when the gateway shuts down: pending approval
	// forms stop waiting.
	stop       context.Context
	stopCancel context.CancelFunc

	mu       sync.Mutex
	draining bool
	// posts counts POST requests being served, which drain waits for.
	posts    sync.WaitGroup
	sessions map[string]*mcpSession
	byOwner  map[string][]string // owner → session ids, oldest first
	sweeping bool
	watched  map[*http.Server]bool
}

// mcpSession is what the gateway keeps of an open session.
type mcpSession struct {
	owner string
	// keyHash is the key that opened it; "" in dev mode.
	keyHash string
	// ctx ends when the session does (DELETE, revoked key, shutdown):
	// a pending approval form stops waiting.
	ctx    context.Context
	cancel context.CancelFunc
}

// mcpCaller is who a request to /mcp acts for: the key's mandate, and
// whether its human answers approval forms in the client.
type mcpCaller struct {
	mandate string
	// attended: the key is ask_in_client (always, in dev mode).
	attended bool
	// owner binds a session to one key (or dev mandate).
	owner   string
	keyHash string
	// keyPrefix names the key in the spend reports.
	keyPrefix string
}

type mcpCallerKey struct{}

// Mount serves the MCP server on /mcp for agent keys (and the dev
// principal).
func (m *Server) Mount(mt *auth.Mount) {
	for _, method := range []string{http.MethodGet, http.MethodPost, http.MethodDelete} {
		mt.Handle(method, "/mcp", auth.Agent, m.serve)
	}
}

// serverFor is the SDK server every request is served by, its tools added
// on the first.
func (m *Server) serverFor(*http.Request) *mcp.Server {
	m.tools.Do(m.addTools)
	return m.server
}

// New returns the MCP server of engine; keyLive tells whether a key, by
// its hash, still authenticates (its sessions end when it does not).
// stateKey (32 bytes or more) seals the request states of 2026-07-28's
// approvals: the composition root gives every gateway of a store the same
// one, kept across restarts (mcp_revisions.go). Its tools are added at
// its first request.
func New(engine *gateway.Engine, log *slog.Logger, keyLive func(hash string) (bool, error), stateKey []byte) *Server {
	if len(stateKey) < 32 {
		panic("mcpserver: the request states' key is missing or shorter than 32 bytes")
	}
	m := &Server{
		engine:   engine,
		keyLive:  keyLive,
		stateKey: stateKey,
		log:      log,
		sessions: map[string]*mcpSession{},
		byOwner:  map[string][]string{},
		watched:  map[*http.Server]bool{},
	}
	m.stop, m.stopCancel = context.WithCancel(context.Background())
	quiet := slog.New(minLevel{log.Handler(), slog.LevelWarn})
	m.server = mcp.NewServer(&mcp.Implementation{Name: "holon", Title: "Holon gateway", Version: "v0"}, &mcp.ServerOptions{
		Instructions: mcpInstructions,
		Logger:       quiet,
	})
	m.server.AddReceivingMiddleware(onlyDeclared)
	stream := mcp.NewStreamableHTTPHandler(m.serverFor, &mcp.StreamableHTTPOptions{
		Logger:         quiet,
		SessionTimeout: mcpSessionIdle,
		// The front door's one rule answers for the Host (a dev gateway
		// answers only its own names, on every route, /mcp included) and
		// for the Origin (origin.go): the SDK's own copy of the first
		// would refuse a dev gateway's public name behind a proxy.
		DisableLocalhostProtection: true,
		MaxRequestBodyBytes:        web.MaxBody,
	})
	// The bearer middleware only carries the caller api.handle has already
	// authenticated into the SDK: its UserID binds the session to the key,
	// and the tools read the caller from it on every request.
	bind := mcpauth.RequireBearerToken(func(ctx context.Context, _ string, r *http.Request) (*mcpauth.TokenInfo, error) {
		c, ok := r.Context().Value(mcpCallerKey{}).(*mcpCaller)
		if !ok {
			return nil, mcpauth.ErrInvalidToken
		}
		return &mcpauth.TokenInfo{UserID: c.owner, Extra: map[string]any{"holon": c}}, nil
	}, &mcpauth.RequireBearerTokenOptions{AllowMissingExpiration: true})
	m.handler = bind(stream)
	m.stateless = bind(mcp.NewStreamableHTTPHandler(m.serverFor, &mcp.StreamableHTTPOptions{
		Logger:    quiet,
		Stateless: true,
		// A client that gives up on a request cancels its tool call, as
		// closing a stateful session's request does.
		PropagateRequestCancellation: true,
		DisableLocalhostProtection:   true,
		MaxRequestBodyBytes:          web.MaxBody,
	}))
	return m
}

// serve is /mcp, behind api.handle: the key is valid, may use /mcp, and
// the account is within its rate limit.
func (m *Server) serve(w http.ResponseWriter, r *http.Request, _ httprouter.Params, p *auth.Principal) {
	m.watch(r)
	c, err := m.callerFor(r, p)
	if err != nil {
		web.Fail(m.log, w, r, err)
		return
	}
	isPost := r.Method == http.MethodPost
	if isPost && !m.enter() {
		w.Header().Set("Retry-After", "5")
		web.Answer(w, holon.Errorf(CodeShuttingDown, "the gateway is shutting down: reconnect in a moment"))
		return
	}
	if isPost {
		defer m.posts.Done()
	}
	sid := r.Header.Get("Mcp-Session-Id")
	if r.Method == http.MethodDelete && sid != "" {
		m.ending(sid, c.owner)
	}
	// The key goes no further than here: the SDK and the tools see the
	// caller only.
	r = r.WithContext(context.WithValue(r.Context(), mcpCallerKey{}, c))
	r.Header = r.Header.Clone()
	r.Header.Set("Authorization", "Bearer holon")
	if statelessRequest(r) {
		m.stateless.ServeHTTP(w, r)
		return
	}
	m.handler.ServeHTTP(w, r)
	if isPost && sid == "" {
		if id := w.Header().Get("Mcp-Session-Id"); id != "" {
			m.track(id, c)
		}
	}
}

// callerFor is who a request acts for: an agent key's mandate, or in dev
// mode the mandate of ?mandate=.
func (m *Server) callerFor(r *http.Request, p *auth.Principal) (*mcpCaller, error) {
	switch p.Kind {
	case token.KindAgent:
		return &mcpCaller{mandate: p.Mandate, attended: p.Key.Ask, owner: "key " + p.Key.Hash, keyHash: p.Key.Hash, keyPrefix: p.Key.Prefix}, nil
	case auth.KindDev:
		id := r.URL.Query().Get("mandate")
		if id == "" {
			return nil, holon.Errorf(holon.CodeInvalidRequest, "the dev gateway's /mcp acts under the mandate its URL names: connect to /mcp?mandate=<id>, such as /mcp?mandate=alice/bookkeeping-q4")
		}
		st, err := m.engine.Mandate(id)
		if err != nil {
			return nil, err
		}
		if st.Mandate.Parent != "" {
			return nil, holon.Errorf(holon.CodeInvalidRequest, "%s is a sub-mandate derived for an agent's run: only that run calls under it", id)
		}
		return &mcpCaller{mandate: id, attended: true, owner: "dev " + id}, nil
	}
	return nil, holon.Errorf(web.CodeForbidden, "/mcp needs an agent key (hlk_a_…)")
}

// enter counts a POST in, unless the gateway is shutting down.
func (m *Server) enter() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.draining {
		return false
	}
	m.posts.Add(1)
	return true
}

// watch ends the MCP sessions cleanly when the http.Server serving them
// shuts down (holon serve on SIGTERM): their event streams are long-lived
// requests that Shutdown would otherwise wait for until its timeout.
func (m *Server) watch(r *http.Request) {
	srv, ok := r.Context().Value(http.ServerContextKey).(*http.Server)
	if !ok {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.watched[srv] {
		return
	}
	m.watched[srv] = true
	srv.RegisterOnShutdown(m.shutdown)
}

// shutdown drains the MCP server: new requests are refused, pending
// approval forms stop waiting (their approvals stay pending), running
// requests answer, then every session is closed, which ends its event
// stream. Calls themselves settle whatever happens: the engine runs them
// detached from their request.
func (m *Server) shutdown() {
	m.mu.Lock()
	if m.draining {
		m.mu.Unlock()
		return
	}
	m.draining = true
	m.mu.Unlock()
	m.stopCancel()
	m.posts.Wait()
	time.Sleep(mcpDrainGrace)
	for ss := range m.server.Sessions() {
		ss.Close()
	}
}

// track records a new session with its owner, ends the owner's oldest
// session beyond mcpSessionsPerOwner, and starts the sweep of revoked keys.
func (m *Server) track(id string, c *mcpCaller) {
	var ss *mcp.ServerSession
	for s := range m.server.Sessions() {
		if s.ID() == id {
			ss = s
			break
		}
	}
	if ss == nil {
		return // closed already (initialization failed)
	}
	ctx, cancel := context.WithCancel(m.stop)
	m.mu.Lock()
	m.sessions[id] = &mcpSession{owner: c.owner, keyHash: c.keyHash, ctx: ctx, cancel: cancel}
	ids := append(m.byOwner[c.owner], id)
	var evict []string
	if n := len(ids) - mcpSessionsPerOwner; n > 0 {
		evict, ids = ids[:n:n], ids[n:]
	}
	m.byOwner[c.owner] = ids
	startSweep := c.keyHash != "" && !m.sweeping
	if startSweep {
		m.sweeping = true
	}
	m.mu.Unlock()
	go func() {
		ss.Wait()
		m.untrack(id)
	}()
	for _, old := range evict {
		m.end(old)
	}
	if startSweep {
		go m.sweep()
	}
}

// untrack forgets a closed session.
func (m *Server) untrack(id string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	s, ok := m.sessions[id]
	if !ok {
		return
	}
	s.cancel()
	delete(m.sessions, id)
	ids := m.byOwner[s.owner]
	for i, x := range ids {
		if x == id {
			ids = append(ids[:i:i], ids[i+1:]...)
			break
		}
	}
	if len(ids) == 0 {
		delete(m.byOwner, s.owner)
	} else {
		m.byOwner[s.owner] = ids
	}
}

// ending is told a session is about to be deleted by its client: a
// pending approval form stops waiting, so the session can close.
func (m *Server) ending(id, owner string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if s, ok := m.sessions[id]; ok && s.owner == owner {
		s.cancel()
	}
}

// end closes a session from the gateway's side.
func (m *Server) end(id string) {
	m.mu.Lock()
	s, ok := m.sessions[id]
	if ok {
		s.cancel()
	}
	m.mu.Unlock()
	for ss := range m.server.Sessions() {
		if ss.ID() == id {
			// Close waits for the session's running requests; the
			// cancel above stops the one kind that waits on the client.
			go ss.Close()
		}
	}
}

// sessionContext is the context of an open session: done when it ends.
func (m *Server) sessionContext(id string) context.Context {
	m.mu.Lock()
	defer m.mu.Unlock()
	if s, ok := m.sessions[id]; ok {
		return s.ctx
	}
	return m.stop
}

// sweep ends, every mcpSweepEvery, the sessions whose key was revoked,
// expired or belongs to a disabled account since they opened, so that
// their event streams and approval forms end too. It runs while sessions
// opened by keys are open.
func (m *Server) sweep() {
	t := time.NewTicker(mcpSweepEvery)
	defer t.Stop()
	for {
		select {
		case <-m.stop.Done():
			m.mu.Lock()
			m.sweeping = false
			m.mu.Unlock()
			return
		case <-t.C:
		}
		m.mu.Lock()
		keys := map[string][]string{}
		for id, s := range m.sessions {
			if s.keyHash != "" {
				keys[s.keyHash] = append(keys[s.keyHash], id)
			}
		}
		if len(keys) == 0 {
			m.sweeping = false
			m.mu.Unlock()
			return
		}
		m.mu.Unlock()
		for hash, ids := range keys {
			live, err := m.keyLive(hash)
			if err != nil {
				m.log.Error("mcp: check a session's key", "err", err)
				continue
			}
			if !live {
				for _, id := range ids {
					m.end(id)
				}
			}
		}
	}
}

// minLevel drops log records below a level: the SDK's informational
// messages are not the gateway's.
type minLevel struct {
	slog.Handler
	min slog.Level
}

func (h minLevel) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= h.min && h.Handler.Enabled(ctx, l)
}

func (h minLevel) WithAttrs(as []slog.Attr) slog.Handler {
	return minLevel{h.Handler.WithAttrs(as), h.min}
}

func (h minLevel) WithGroup(name string) slog.Handler {
	return minLevel{h.Handler.WithGroup(name), h.min}
}
