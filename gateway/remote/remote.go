package remote

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptrace"
	"sync"
	"time"
)

// This file holds what the two remote runtimes (mcp and webhook) share:
// their configuration, and the HTTP client they reach agents with, which
// dials through the NetGuard, never follows a redirect and refuses an
// answer above MaxResponseBytes while reading it.

// DefaultMaxResponseBytes bounds an answer from a remote agent (gateway.md
// §7 "Limits and platform rules": at most 10 MB).
const DefaultMaxResponseBytes = 10 << 20

// Config configures a runtime of remote agents (mcp or webhook).
type Config struct {
	// Guard is the network policy and the resolver and dialer it uses.
	// Agents shipped with the gateway (Invocation.Shipped) are exempt.
	Guard NetGuard
	// Credentials returns the endpoint token an agent's author set, by
	// agent id (ns/name, all versions); nil or !ok: no Authorization header.
	Credentials func(agentID string) (token string, ok bool)
	// MaxResponseBytes bounds one answer (DefaultMaxResponseBytes when 0).
	MaxResponseBytes int64
	// MaxSessions bounds the MCP sessions open to one endpoint, each used by
	// one call at a time (DefaultMaxSessions when 0); more calls wait.
	MaxSessions int
	// IdleTimeout closes an MCP session, or a connection, unused this long
	// (DefaultIdleTimeout when 0).
	IdleTimeout time.Duration
	// Now is the clock (time.Now when nil).
	Now func() time.Time
	// Logger receives internal errors only.
	Logger *slog.Logger
	// RootCAs are the roots trusted for agents' TLS certificates (the
	// system's when nil): tests serve https agents on loopback.
	RootCAs *x509.CertPool
}

// Defaults of the MCP session pool.
const (
	DefaultMaxSessions = 16
	DefaultIdleTimeout = 90 * time.Second
)

func (c Config) withDefaults() Config {
	if c.MaxResponseBytes <= 0 {
		c.MaxResponseBytes = DefaultMaxResponseBytes
	}
	if c.MaxSessions <= 0 {
		c.MaxSessions = DefaultMaxSessions
	}
	if c.IdleTimeout <= 0 {
		c.IdleTimeout = DefaultIdleTimeout
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

func (c Config) credential(agentID string) (string, bool) {
	if c.Credentials == nil {
		return "", false
	}
	tok, ok := c.Credentials(agentID)
	if !ok || tok == "" {
		return "", false
	}
	return tok, true
}

// remoteHTTP is the pair of HTTP transports a remote runtime uses: one
// guarded, one open for the exempt shipped agents. They never share a
// connection, so a connection opened without the guard never serves a
// guarded call.
type remoteHTTP struct {
	guarded, open *http.Transport
	max           int64
}

func newRemoteHTTP(cfg Config) *remoteHTTP {
	g := cfg.Guard
	transport := func(dial func(ctx context.Context, network, addr string) (net.Conn, error)) *http.Transport {
		return &http.Transport{
			Proxy:                 nil, // a proxy would be dialled instead of the agent, and checked instead of it
			DialContext:           dial,
			ForceAttemptHTTP2:     true,
			MaxIdleConns:          256,
			MaxIdleConnsPerHost:   cfg.MaxSessions,
			IdleConnTimeout:       cfg.IdleTimeout,
			TLSHandshakeTimeout:   10 * time.Second,
			ExpectContinueTimeout: time.Second,
			TLSClientConfig:       &tls.Config{RootCAs: cfg.RootCAs, MinVersion: tls.VersionTLS12},
		}
	}
	return &remoteHTTP{guarded: transport(g.DialContext), open: transport(g.DialOpen), max: cfg.MaxResponseBytes}
}

// client is an HTTP client for one agent: guarded unless exempt, with the
// author's token when one is set, bodies bounded, redirects not followed.
func (h *remoteHTTP) client(exempt bool, token string) *http.Client {
	base := h.guarded
	if exempt {
		base = h.open
	}
	return &http.Client{
		Transport: &guardedRoundTripper{base: base, max: h.max, token: token},
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		},
	}
}

func (h *remoteHTTP) closeIdle() {
	h.guarded.CloseIdleConnections()
	h.open.CloseIdleConnections()
}

// dropStale closes the idle connections of one transport, after one of them
// turned out dead, so that a retry dials afresh.
func (h *remoteHTTP) dropStale(exempt bool) {
	if exempt {
		h.open.CloseIdleConnections()
		return
	}
	h.guarded.CloseIdleConnections()
}

// ErrResponseTooLarge is the answer of an agent that sent more than the
// response limit; reading stops at the limit.
var ErrResponseTooLarge = errors.New("answer above the response size limit")

// guardedRoundTripper sets the Authorization header, records what became of
// each request in the call's probe, and bounds every response body.
type guardedRoundTripper struct {
	base  http.RoundTripper
	max   int64
	token string
}

func (t *guardedRoundTripper) RoundTrip(req *http.Request) (*http.Response, error) {
	p := probeFrom(req.Context())
	if p != nil {
		// A shallow copy: the caller's request is not to be changed.
		req = req.WithContext(httptrace.WithClientTrace(req.Context(), &p.trace))
	}
	if t.token != "" {
		if p == nil {
			req = req.WithContext(req.Context())
		}
		req.Header = req.Header.Clone()
		req.Header.Set("Authorization", "Bearer "+t.token)
	}
	resp, err := t.base.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	if p != nil {
		p.answered(resp)
	}
	resp.Body = &limitedBody{rc: resp.Body, left: t.max, max: t.max, probe: p}
	return resp, nil
}

// limitedBody reads at most max bytes of a body and then fails, so that an
// oversized answer is refused without being held in memory.
type limitedBody struct {
	rc    io.ReadCloser
	left  int64
	max   int64
	probe *callProbe
	err   error
}

func (b *limitedBody) Read(p []byte) (int, error) {
	if b.err != nil {
		return 0, b.err
	}
	if int64(len(p)) > b.left+1 {
		p = p[:b.left+1]
	}
	n, err := b.rc.Read(p)
	if int64(n) > b.left {
		n = int(b.left)
		b.left = 0
		b.err = fmt.Errorf("%w (%d bytes)", ErrResponseTooLarge, b.max)
		if b.probe != nil {
			b.probe.tooLarge()
		}
		return n, b.err
	}
	b.left -= int64(n)
	return n, err
}

func (b *limitedBody) Close() error { return b.rc.Close() }

// callProbe records, for one call, what its HTTP requests did: whether any
// reached the agent (after which a retry could run the agent twice), how it
// answered, and whether an answer was over the limit.
type callProbe struct {
	trace     httptrace.ClientTrace // the hooks that record into the probe
	mu        sync.Mutex
	sent      bool
	reused    bool // the last request went out on a kept-alive connection
	firstByte bool // and some answer came back on it
	status    int
	location  string
	oversize  bool
}

type probeKey struct{}

func withProbe(ctx context.Context, p *callProbe) context.Context {
	p.trace = httptrace.ClientTrace{
		GotConn: func(info httptrace.GotConnInfo) { p.gotConn(info.Reused) },
		WroteRequest: func(info httptrace.WroteRequestInfo) {
			if info.Err == nil {
				p.wrote()
			}
		},
		GotFirstResponseByte: p.gotFirstByte,
	}
	return context.WithValue(ctx, probeKey{}, p)
}

func probeFrom(ctx context.Context) *callProbe {
	p, _ := ctx.Value(probeKey{}).(*callProbe)
	return p
}

func (p *callProbe) gotConn(reused bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.reused, p.firstByte = reused, false
}

func (p *callProbe) gotFirstByte() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.firstByte = true
}

func (p *callProbe) wrote() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.sent = true
}

func (p *callProbe) answered(resp *http.Response) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.status = resp.StatusCode
	if resp.StatusCode >= 300 && resp.StatusCode < 400 {
		p.location = resp.Header.Get("Location")
	}
}

func (p *callProbe) tooLarge() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.oversize = true
}

// probeState is a snapshot of a probe.
type probeState struct {
	sent     bool
	status   int
	location string
	oversize bool
	// stale: the request went out on a kept-alive connection that failed
	// before a byte of answer, the mark of a connection the server had
	// already closed (it restarted, or timed the connection out).
	stale bool
}

func (p *callProbe) state() probeState {
	p.mu.Lock()
	defer p.mu.Unlock()
	return probeState{sent: p.sent, status: p.status, location: p.location, oversize: p.oversize,
		stale: p.reused && !p.firstByte && p.status == 0}
}

// redirectMessage says that a redirect was not followed.
func redirectMessage(status int, location string) string {
	if location == "" {
		return fmt.Sprintf("the endpoint answered %d, a redirect, which is not followed", status)
	}
	return fmt.Sprintf("the endpoint answered %d, a redirect to %s, which is not followed", status, location)
}
