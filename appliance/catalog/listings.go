// Package catalog is what the gateway says about its agents: their
// listing and detail (GET /v0/agents, /v0/agents/{ns}/{name}),
// evaluations on the shipped and private suites (run in the background
// from a queue in the store), the public catalogue, authors' earnings and
// the public demo.
//
// It may import the domain (holon), journal, the engine (gateway and its
// contract), token, web, auth, wire (the listing's answer types),
// ratelimit and files (the size bound of a fixture); no other room.
package catalog

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"holon.dev/holon/appliance/auth"
	"holon.dev/holon/gateway"
)

// Catalog is what the appliance says about its agents: their listing and
// detail, evaluations, the public catalogue, authors' earnings and the
// public demo.
type Catalog struct {
	engine  *gateway.Engine
	evals   *evaluator
	demo    *demo
	samples map[string]sampleRecord
	// log gets the internal errors of the listings' handlers.
	log *slog.Logger
}

// Options are what the catalogue is opened with.
type Options struct {
	// PrivateEvals is a directory of suites that replace the shipped
	// ones, capability by capability ("": the shipped ones only).
	PrivateEvals string
	// PutFixture stores an evaluation fixture as a platform file and
	// returns its handle.
	PutFixture func(ctx context.Context, contentType string, data []byte) (string, error)
	// Records adds the sample records shipped with the gateway.
	Records bool
	// SiteURL is the public site whose pages may call the demo.
	SiteURL string
	// TrustProxy reads the client's address from X-Forwarded-For.
	TrustProxy bool
	// Production warns when no private suites are configured.
	Production bool
	Log        *slog.Logger
	Now        func() time.Time
}

// Open loads the eval suites (storing their fixtures) and the last
// evaluations, once the registry is complete, and prepares the demo.
// Run runs the evaluation queue.
func Open(ctx context.Context, e *gateway.Engine, o Options) (*Catalog, error) {
	suites, err := loadSuites(o.PrivateEvals)
	if err != nil {
		return nil, err
	}
	if err := storeFixtures(ctx, suites, o.PutFixture); err != nil {
		return nil, err
	}
	if o.Production && o.PrivateEvals == "" {
		o.Log.Warn("no HOLON_PRIVATE_EVALS: agents are evaluated on the public sample cases only, which any author can read")
	}
	evals := newEvaluator(e, suites, o.Log, o.Now)
	if err := evals.restore(); err != nil {
		return nil, fmt.Errorf("read evaluations: %w", err)
	}
	c := &Catalog{engine: e, evals: evals, demo: newDemo(e, o), log: o.Log}
	if o.Records {
		if c.samples, err = loadSampleRecords(); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// QueueStale queues every listed version whose last evaluation is
// missing or was measured on other suites; call it before Run, once the
// registry is complete, so that a wait for the queue sees them.
func (l *Catalog) QueueStale(ctx context.Context) {
	if err := l.evals.enqueueStale(ctx); err != nil {
		l.log.Error("queue evaluations", "err", err)
	}
}

// Run runs the evaluation queue until ctx is done, and returns when every
// run in flight has stopped.
func (l *Catalog) Run(ctx context.Context) { l.evals.run(ctx) }

// Mount registers the agents' listing and detail, the catalogue, the
// demo and, on a hosted gateway, the author's view.
func (l *Catalog) Mount(m *auth.Mount, hosted bool) {
	m.Handle("GET", "/v0/agents", auth.Anyone, l.listAgents)
	m.Handle("GET", "/v0/agents/:ns/:name", auth.Anyone, l.getAgent)
	m.Handle("GET", "/v0/catalog", auth.Anyone, l.catalog)
	m.Handle("POST", "/v0/demo/:ns/:name", auth.Anyone, l.demo.try)
	m.Router.OPTIONS("/v0/demo/:ns/:name", l.demo.preflight)
	if hosted {
		m.Handle("GET", "/v0/me/agents", auth.Human, l.myAgents)
	}
}

// Evaluate queues a listed version for evaluation on the suites of its
// capabilities and returns once the queue entry is durable; the run itself
// happens in the background. A version none of whose capabilities has a
// suite is not queued (it stays unevaluated, so require.evaluated refuses
// it). Evaluating again replaces the last result when the new run ends.
func (l *Catalog) Evaluate(ctx context.Context, ref string) error { return l.evals.enqueue(ctx, ref) }

// WaitIdle blocks until no evaluation is queued or running, or ctx is done.
func (l *Catalog) WaitIdle(ctx context.Context) error { return l.evals.waitIdle(ctx) }
