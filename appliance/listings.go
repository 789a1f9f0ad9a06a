package appliance

import (
	"context"
	"time"

	"holon.dev/holon/gateway/contract"
)

// RegisterVersion lists a version at run time the way publishing does once
// its rules have passed, through the same path (publishing.Publisher.List): the version's
// record is stored (published), it is added to the registry, its
// evaluation is queued and the OnPublished hooks are told. Publishing's own
// checks (namespace, GitHub, endpoint) are not made here.
func (a *App) RegisterVersion(ctx context.Context, m *contract.Manifest) error {
	_, err := a.publisher.List(ctx, m)
	return err
}

// WaitEvaluations blocks until no evaluation is queued or running, or ctx
// is done.
func (a *App) WaitEvaluations(ctx context.Context) error {
	waitCtx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	return a.listings.WaitIdle(waitCtx)
}

// Evaluate queues a listed version for evaluation on the suites of its
// capabilities and returns once the queue entry is durable; the run itself
// happens in the background. It is the seam publishing calls after a
// version is committed and listed (and what RegisterVersion calls): the
// entry survives a restart, and a run cut short is run again.
func (a *App) Evaluate(ctx context.Context, ref string) error { return a.listings.Evaluate(ctx, ref) }

// OnPublished registers fn to be called with the reference
// (ns/name@version) of every version published from now on, after it is
// stored and listed (so Engine().Registry().Get(ref) finds it and calls
// reach it). Each call runs in its own goroutine: fn may take its time.
// It is the seam the evaluation runner attaches to; a runner that must
// survive restarts keeps its own record of what it has still to do.
func (a *App) OnPublished(fn func(ref string)) { a.publisher.OnPublished(fn) }
