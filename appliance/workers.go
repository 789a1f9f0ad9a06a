package appliance

import (
	"context"
	"sync"
	"time"

	"holon.dev/holon"
	"holon.dev/holon/appliance/idempotency"
	"holon.dev/holon/appliance/publishing"
)

// startWorkers starts the background loops, each until Close: the
// expiry of approvals (and of sign-in states), the evaluation queue, the
// files' sweep, the Idempotency-Keys' sweep, and on a shared store the
// recovery of the calls of gateways that died.
func (a *App) startWorkers(ctx context.Context) {
	a.workers = newWorkers(ctx)
	a.listings.QueueStale(a.workers.ctx)
	w, s := a.workers, a.store
	w.lead(s, "expire", tick(time.Hour, a.expire))
	w.lead(s, "evaluations", a.listings.Run)
	w.lead(s, "files-sweep", func(ctx context.Context) { a.files.SweepEvery(ctx, time.Minute) })
	w.lead(s, "idempotency-sweep", func(ctx context.Context) { a.idem.SweepEvery(ctx, a.log) })
	w.lead(s, "alert-webhooks", a.alerts.Run)
	if buckets, ok := s.(holon.SharedLimits); ok {
		w.lead(s, "rate-buckets", tick(time.Minute, func(ctx context.Context) {
			if _, err := buckets.ForgetFullBuckets(ctx); err != nil && ctx.Err() == nil {
				a.log.Error("forget full rate-limit buckets", "err", err)
			}
		}))
	}
	w.run(a.recoverEvery) // on every gateway: each closes only dead gateways' calls
}

// expire expires stale approvals, and the sign-in states that expired.
func (a *App) expire(ctx context.Context) {
	if _, err := a.engine.ExpireApprovals(ctx); err != nil && ctx.Err() == nil {
		a.log.Error("expire approvals", "err", err)
	}
	if a.signin != nil {
		if _, err := a.signin.Purge(a.cfg.Now()); err != nil && ctx.Err() == nil {
			a.log.Error("purge expired sign-in states", "err", err)
		}
	}
}

// RegistrySyncEvery is how often a gateway on a store several gateways
// share (holon.SharedStore) reads what the others changed in the
// registry it keeps in memory: versions published, versions yanked (by
// their author, by the operator, with a disabled account) and evaluation
// verdicts (publishing.Sync). A change made on one gateway is in effect
// on every other within this and one read. Everything else a call
// depends on (keys, accounts, mandates, balances) is read from the store
// by every request.
const RegistrySyncEvery = time.Second

// recoverEvery closes, on a store several gateways share
// (holon.SharedStore), the calls in flight of gateways that died, once
// their lease ran out: twice per lease, so within a lease and a half of
// the death. The start-up pass (App.recover) is the only one on a store
// this process holds alone. It marks the Idempotency-Keys of the calls it
// closed as interrupted, as start-up does. Between those passes it keeps
// the registry in step with the other gateways' changes
// (publishing.Sync), every RegistrySyncEvery.
func (a *App) recoverEvery(ctx context.Context) {
	shared, ok := a.store.(holon.SharedStore)
	if !ok {
		return
	}
	t := time.NewTicker(shared.Lease() / 2)
	defer t.Stop()
	reg := publishing.NewSync(a.store, a.engine.Registry(), a.log)
	st := time.NewTicker(RegistrySyncEvery)
	defer st.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-st.C:
			reg.Every(ctx)
			continue
		case <-t.C:
		}
		closed, err := a.engine.Recover(ctx)
		if err != nil && ctx.Err() == nil {
			if holon.ErrorCode(err) != holon.CodeStoreUnavailable {
				a.log.Error("close the calls of gateways that stopped", "err", err)
			}
			continue
		}
		if closed == 0 {
			continue
		}
		a.log.Warn("closed the calls in flight of a gateway whose lease ran out", "calls", closed)
		if _, err := idempotency.InterruptRunning(ctx, a.store, a.cfg.Now()); err != nil && ctx.Err() == nil {
			a.log.Error("mark interrupted idempotency keys", "err", err)
		}
	}
}

// workers are the appliance's background loops: one context, cancelled by
// stop, which then waits for every loop to return.
type workers struct {
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// newWorkers returns a group whose context outlives ctx's cancellation
// (the loops end at Close, not when Open's context does).
func newWorkers(ctx context.Context) *workers {
	w := &workers{}
	w.ctx, w.cancel = context.WithCancel(context.WithoutCancel(ctx))
	return w
}

// run runs fn in the group until its context ends.
func (w *workers) run(fn func(ctx context.Context)) {
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		fn(w.ctx)
	}()
}

// lead runs fn in the group as run does; on a store several gateways
// share that elects leaders (holon.Leader), only while this gateway leads
// job, so that the work runs on one gateway at a time and moves to
// another when its gateway dies.
func (w *workers) lead(store holon.Store, job string, fn func(ctx context.Context)) {
	l, ok := store.(holon.Leader)
	if !ok {
		w.run(fn)
		return
	}
	w.run(func(ctx context.Context) { l.Lead(ctx, job, fn) })
}

// tick is a loop that runs fn at once and then every period, until its
// context ends.
func tick(period time.Duration, fn func(ctx context.Context)) func(ctx context.Context) {
	return func(ctx context.Context) {
		t := time.NewTicker(period)
		defer t.Stop()
		for {
			fn(ctx)
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}
}

// stop cancels the group's context and waits for every loop.
func (w *workers) stop() {
	w.cancel()
	w.wg.Wait()
}
