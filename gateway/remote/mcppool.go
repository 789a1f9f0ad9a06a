package remote

import (
	"context"
	"crypto/sha256"
	"sync"
	"time"
)

// The MCP session pool: calls to one endpoint reuse its sessions (and,
// under them, the HTTP connections), where the original documents opened
// one connection per call. A session serves one call at a time; at most
// MaxSessions are open per endpoint (more calls wait for one, within their
// hard timeout); a session idle for IdleTimeout is closed; a session whose
// connection failed is dropped and never handed out again.

// poolKey names the sessions that may serve a call: same endpoint, same
// network policy, same credential.
type poolKey struct {
	endpoint string
	exempt   bool
	auth     [32]byte // SHA-256 of the bearer token; zero without one
}

func newPoolKey(endpoint string, exempt bool, token string) poolKey {
	k := poolKey{endpoint: endpoint, exempt: exempt}
	if token != "" {
		k.auth = sha256.Sum256([]byte(token))
	}
	return k
}

type sessionPool struct {
	max  int
	idle time.Duration
	now  func() time.Time

	mu     sync.Mutex
	eps    map[poolKey]*endpointSessions
	closed bool
}

// endpointSessions are the sessions of one pool key.
type endpointSessions struct {
	slots chan struct{}    // one token per session in use
	idle  []*pooledSession // least recently used first
	users int              // callers holding or waiting for a slot
	timer *time.Timer      // the next idle sweep, when one is due
	all   map[*pooledSession]bool
}

// pooledSession is one MCP client session of the pool.
type pooledSession struct {
	cs       *mcpSession
	key      poolKey
	lastUsed time.Time
}

func newSessionPool(max int, idle time.Duration, now func() time.Time) *sessionPool {
	return &sessionPool{max: max, idle: idle, now: now, eps: map[poolKey]*endpointSessions{}}
}

// acquire hands out a live idle session of key, or opens one with connect
// when none is idle and fewer than max are open.
func (p *sessionPool) acquire(ctx context.Context, key poolKey, connect func(context.Context) (*mcpSession, error)) (*pooledSession, error) {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil, errPoolClosed
	}
	ep := p.eps[key]
	if ep == nil {
		ep = &endpointSessions{slots: make(chan struct{}, p.max), all: map[*pooledSession]bool{}}
		p.eps[key] = ep
	}
	ep.users++
	p.mu.Unlock()
	select {
	case ep.slots <- struct{}{}:
	case <-ctx.Done():
		p.leave(key, ep)
		return nil, ctx.Err()
	}
	p.mu.Lock()
	now := p.now()
	for len(ep.idle) > 0 {
		s := ep.idle[len(ep.idle)-1]
		ep.idle = ep.idle[:len(ep.idle)-1]
		if now.Sub(s.lastUsed) >= p.idle {
			p.closeLocked(ep, s)
			continue
		}
		p.mu.Unlock()
		return s, nil
	}
	p.mu.Unlock()
	cs, err := connect(ctx)
	if err != nil {
		<-ep.slots
		p.leave(key, ep)
		return nil, err
	}
	s := &pooledSession{cs: cs, key: key}
	p.mu.Lock()
	ep.all[s] = true
	closed := p.closed
	p.mu.Unlock()
	if closed {
		p.drop(s)
		return nil, errPoolClosed
	}
	return s, nil
}

// release returns a session after a call.
func (p *sessionPool) release(s *pooledSession) {
	p.mu.Lock()
	ep := p.eps[s.key]
	if p.closed || ep == nil {
		p.mu.Unlock()
		p.drop(s)
		return
	}
	s.lastUsed = p.now()
	ep.idle = append(ep.idle, s)
	if ep.timer == nil {
		key := s.key
		ep.timer = time.AfterFunc(p.idle, func() { p.sweep(key) })
	}
	ep.users--
	p.mu.Unlock()
	<-ep.slots
}

// drop closes a session that failed, and frees its slot.
func (p *sessionPool) drop(s *pooledSession) {
	p.mu.Lock()
	ep := p.eps[s.key]
	if ep != nil {
		delete(ep.all, s)
	}
	p.mu.Unlock()
	go s.cs.Close()
	if ep != nil {
		<-ep.slots
		p.leave(s.key, ep)
	}
}

// leave forgets an endpoint nobody uses any more.
func (p *sessionPool) leave(key poolKey, ep *endpointSessions) {
	p.mu.Lock()
	defer p.mu.Unlock()
	ep.users--
	p.forgetLocked(key, ep)
}

func (p *sessionPool) forgetLocked(key poolKey, ep *endpointSessions) {
	if ep.users == 0 && len(ep.idle) == 0 && p.eps[key] == ep {
		if ep.timer != nil {
			ep.timer.Stop()
		}
		delete(p.eps, key)
	}
}

func (p *sessionPool) closeLocked(ep *endpointSessions, s *pooledSession) {
	delete(ep.all, s)
	go s.cs.Close()
}

// sweep closes the sessions of key idle for longer than the idle timeout.
func (p *sessionPool) sweep(key poolKey) {
	p.mu.Lock()
	defer p.mu.Unlock()
	ep := p.eps[key]
	if ep == nil {
		return
	}
	ep.timer = nil
	now := p.now()
	kept := ep.idle[:0]
	var next time.Duration
	for _, s := range ep.idle {
		age := now.Sub(s.lastUsed)
		if age >= p.idle {
			p.closeLocked(ep, s)
			continue
		}
		if left := p.idle - age; next == 0 || left < next {
			next = left
		}
		kept = append(kept, s)
	}
	clear(ep.idle[len(kept):])
	ep.idle = kept
	if len(kept) > 0 && !p.closed {
		ep.timer = time.AfterFunc(next, func() { p.sweep(key) })
	}
	p.forgetLocked(key, ep)
}

// open counts the sessions open to key, in use or idle.
func (p *sessionPool) open(key poolKey) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if ep := p.eps[key]; ep != nil {
		return len(ep.all)
	}
	return 0
}

// close closes every idle session and refuses new calls; sessions in use
// are closed when they are released.
func (p *sessionPool) close() {
	p.mu.Lock()
	p.closed = true
	var idle []*pooledSession
	for key, ep := range p.eps {
		if ep.timer != nil {
			ep.timer.Stop()
			ep.timer = nil
		}
		idle = append(idle, ep.idle...)
		for _, s := range ep.idle {
			delete(ep.all, s)
		}
		ep.idle = nil
		p.forgetLocked(key, ep)
	}
	p.mu.Unlock()
	var wg sync.WaitGroup
	for _, s := range idle {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = s.cs.Close()
		}()
	}
	wg.Wait()
}

type poolError string

func (e poolError) Error() string { return string(e) }

// errPoolClosed: the runner was closed.
const errPoolClosed = poolError("the MCP runtime is closed")
