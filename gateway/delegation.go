package gateway

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"time"

	"holon.dev/holon"
)

// Remote delegation (spec/README.md, last row): a remote agent that
// declares calls receives a grant, {url, token, expires}, and makes its
// downstream calls with POST <url> under the token. The token acts under
// the run's derived sub-mandate only, through runState.Call, so every rule
// of gateway.md §3 applies; and only until the run ends. Tokens live in
// memory: runs do not survive a restart, and neither do their tokens.

// DelegationTokenPrefix starts every delegation token, so that the API can
// tell one from an API key.
const DelegationTokenPrefix = "hld_"

// DelegationGrant is what a remote orchestrator receives in
// _meta["holon/delegation"] (MCP) or the x-holon-delegation header
// (webhook).
type DelegationGrant struct {
	// URL is where delegated calls are made: <public URL>/v0/calls.
	URL string `json:"url"`
	// Token authorises them (Authorization: Bearer <token>).
	Token string `json:"token"`
	// Expires is the run's hard timeout; the token dies earlier when the
	// run ends.
	Expires time.Time `json:"expires"`
}

// DelegationGranter is implemented by the Delegator of a run whose agent
// declares calls: a remote runtime asks it for the grant to pass on.
type DelegationGranter interface {
	// Grant returns the run's grant, issuing it on first use; its expiry is
	// ctx's deadline (the run's hard timeout).
	Grant(ctx context.Context) (DelegationGrant, error)
}

// delegations are the grants of the runs in flight, by the SHA-256 of their
// token (a lookup by hash leaks nothing about the token through timing).
type delegations struct {
	mu        sync.Mutex
	byHash    map[[32]byte]*delegation
	byRun     map[*runState]*delegation
	lastSweep time.Time
}

type delegation struct {
	run   *runState
	hash  [32]byte
	grant DelegationGrant
}

// sweepEvery is how often ended and expired grants are dropped.
const sweepEvery = time.Minute

// Grant issues (once) the run's delegation grant.
func (s *runState) Grant(ctx context.Context) (DelegationGrant, error) {
	e := s.e
	if s.sub == nil {
		return DelegationGrant{}, holon.Errorf(holon.CodeNotDeclared, "%s declares no calls: it cannot delegate", s.manifest.Ref())
	}
	if e.publicURL == "" {
		return DelegationGrant{}, holon.Errorf(holon.CodeGatewayError,
			"%s declares calls, and remote delegation needs the gateway's public URL (HOLON_PUBLIC_URL), which is not set", s.manifest.Ref())
	}
	s.mu.Lock()
	closed := s.closed
	s.mu.Unlock()
	if closed {
		return DelegationGrant{}, holon.Errorf(holon.CodeInvalidToken, "run %s has ended", s.rid)
	}
	now := e.now()
	ttl := time.Duration(s.manifest.Timeout()) * time.Second
	if dl, ok := ctx.Deadline(); ok {
		// The deadline is on the real clock; the engine's may be another.
		ttl = time.Until(dl)
	}
	return e.delegations.issue(s, e.publicURL+"/v0/calls", now.Add(ttl).UTC(), now)
}

func (d *delegations) issue(s *runState, url string, expires, now time.Time) (DelegationGrant, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.sweepLocked(now)
	if g, ok := d.byRun[s]; ok {
		return g.grant, nil
	}
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return DelegationGrant{}, fmt.Errorf("delegation token: %w", err)
	}
	tok := DelegationTokenPrefix + base64.RawURLEncoding.EncodeToString(b[:])
	g := &delegation{run: s, hash: sha256.Sum256([]byte(tok)), grant: DelegationGrant{URL: url, Token: tok, Expires: expires}}
	if d.byHash == nil {
		d.byHash, d.byRun = map[[32]byte]*delegation{}, map[*runState]*delegation{}
	}
	d.byHash[g.hash] = g
	d.byRun[s] = g
	return g.grant, nil
}

// lookup finds the live grant of a token.
func (d *delegations) lookup(token string, now time.Time) (*delegation, error) {
	if !strings.HasPrefix(token, DelegationTokenPrefix) {
		return nil, holon.Errorf(holon.CodeInvalidToken, "not a delegation token")
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.sweepLocked(now)
	g, ok := d.byHash[sha256.Sum256([]byte(token))]
	switch {
	case !ok:
		return nil, holon.Errorf(holon.CodeInvalidToken, "unknown delegation token (the run it was issued to may have ended)")
	case !now.Before(g.grant.Expires):
		d.dropLocked(g)
		return nil, holon.Errorf(holon.CodeInvalidToken, "the delegation token expired at %s", g.grant.Expires.Format(time.RFC3339))
	case g.run.ended():
		d.dropLocked(g)
		return nil, holon.Errorf(holon.CodeInvalidToken, "run %s has ended: its delegation token is no longer valid", g.run.rid)
	}
	return g, nil
}

func (d *delegations) sweepLocked(now time.Time) {
	if now.Sub(d.lastSweep) < sweepEvery {
		return
	}
	d.lastSweep = now
	for _, g := range d.byHash {
		if !now.Before(g.grant.Expires) || g.run.ended() {
			d.dropLocked(g)
		}
	}
}

func (d *delegations) dropLocked(g *delegation) {
	delete(d.byHash, g.hash)
	delete(d.byRun, g.run)
}

// ended reports whether the run refuses new downstream calls.
func (s *runState) ended() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

// DelegatedCall is a downstream call a remote orchestrator makes with its
// delegation token (POST /v0/calls).
type DelegatedCall struct {
	// Token is the delegation token.
	Token string
	// Mandate, when set, must be the run's sub-mandate: a token acts under
	// no other.
	Mandate string
	// Target names the agent or capability, and an optional max_cost in
	// the orchestrator's currency, as its declared calls are.
	Target Target
	// Input is the call's input.
	Input json.RawMessage
}

// CallDelegated makes one downstream call for the remote run that holds the
// token, under that run's sub-mandate and with every rule of a dev agent's
// ctx.call. A token that is unknown, expired, or whose run has ended is
// refused with invalid_token, and nothing is recorded.
func (e *Engine) CallDelegated(ctx context.Context, dc DelegatedCall) (CallOutcome, error) {
	g, err := e.delegations.lookup(dc.Token, e.now())
	if err != nil {
		return CallOutcome{}, err
	}
	if dc.Mandate != "" && dc.Mandate != g.run.sub.ID {
		return CallOutcome{}, holon.Errorf(holon.CodeNotFound, "no mandate %s for this token: it acts under %s only (leave mandate out)", dc.Mandate, g.run.sub.ID)
	}
	if len(dc.Input) == 0 {
		dc.Input = json.RawMessage("{}")
	}
	if err := CheckJSON(dc.Input, "input"); err != nil {
		return CallOutcome{}, err
	}
	out := g.run.Call(ctx, dc.Target, dc.Input)
	if out.Receipt == "" && g.run.ended() {
		// The run ended between the lookup and the call: the call was refused.
		return CallOutcome{}, holon.Errorf(holon.CodeInvalidToken, "run %s has ended: its delegation token is no longer valid", g.run.rid)
	}
	return out, nil
}

// DelegationMandate is the sub-mandate a live delegation token acts under.
func (e *Engine) DelegationMandate(token string) (string, error) {
	g, err := e.delegations.lookup(token, e.now())
	if err != nil {
		return "", err
	}
	return g.run.sub.ID, nil
}
