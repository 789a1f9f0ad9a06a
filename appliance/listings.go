package appliance

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"holon.dev/holon/appliance/auth"
	"holon.dev/holon/gateway"
	"holon.dev/holon/gateway/contract"
)

// listings is what the appliance says about its agents beyond the call
// API: evaluations, the public catalogue, authors' earnings and the public
// demo.
type listings struct {
	engine  *gateway.Engine
	evals   *evaluator
	demo    *demo
	samples map[string]sampleRecord
	// log gets the internal errors of the listings' handlers.
	log *slog.Logger
}

// initListings loads the eval suites and the last evaluations (after the
// registry is complete), and prepares the demo. Call startListings to run
// the evaluation queue.
func (a *App) initListings() error {
	suites, err := loadSuites(a.cfg.PrivateEvals)
	if err != nil {
		return err
	}
	if err := storeFixtures(context.Background(), suites, a.files.PutFixture); err != nil {
		return err
	}
	if a.cfg.Production() && a.cfg.PrivateEvals == "" {
		a.log.Warn("no HOLON_PRIVATE_EVALS: agents are evaluated on the public sample cases only, which any author can read")
	}
	a.evals = newEvaluator(a.engine, suites, a.log, a.cfg.Now)
	if err := a.evals.restore(); err != nil {
		return fmt.Errorf("read evaluations: %w", err)
	}
	a.listings = &listings{engine: a.engine, evals: a.evals, demo: newDemo(a.engine, a.cfg), log: a.log}
	if a.cfg.Records {
		if a.listings.samples, err = loadSampleRecords(); err != nil {
			return err
		}
	}
	return nil
}

// startListings runs the evaluation queue until ctx is done; the returned
// channel closes when every run in flight has stopped.
func (a *App) startListings(ctx context.Context) <-chan struct{} {
	if err := a.evals.enqueueStale(ctx); err != nil {
		a.log.Error("queue evaluations", "err", err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		a.evals.run(ctx)
	}()
	return done
}

// routeListings registers the catalogue, the author's view and the demo.
func (api *api) routeListings(l *listings) {
	api.handle("GET", "/v0/catalog", auth.Anyone, l.catalog)
	api.handle("POST", "/v0/demo/:ns/:name", auth.Anyone, l.demo.try)
	api.router.OPTIONS("/v0/demo/:ns/:name", l.demo.preflight)
	if api.hosted != nil {
		api.handle("GET", "/v0/me/agents", auth.Human, l.myAgents)
	}
}

// RegisterVersion lists a version at run time the way publishing does once
// its rules have passed, through the same path (listVersion): the version's
// record is stored (published), it is added to the registry, its
// evaluation is queued and the OnPublished hooks are told. Publishing's own
// checks (namespace, GitHub, endpoint) are not made here.
func (a *App) RegisterVersion(ctx context.Context, m *contract.Manifest) error {
	_, err := a.listVersion(ctx, m)
	return err
}

// WaitEvaluations blocks until no evaluation is queued or running, or ctx
// is done.
func (a *App) WaitEvaluations(ctx context.Context) error {
	waitCtx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	return a.evals.waitIdle(waitCtx)
}
