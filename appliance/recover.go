package appliance

import (
	"context"
	"time"

	"holon.dev/holon"
	"holon.dev/holon/appliance/idempotency"
)

// recoverEvery closes, on a store several gateways share
// (holon.SharedStore), the calls in flight of gateways that died, once
// their lease ran out: twice per lease, so within a lease and a half of
// the death. The start-up pass (App.init) is the only one on a store this
// process holds alone. It marks the Idempotency-Keys of the calls it
// closed as interrupted, as start-up does. Between those passes it keeps
// the registry in step with the other gateways' changes
// (registry_sync.go), every RegistrySyncEvery.
func (a *App) recoverEvery(ctx context.Context) {
	shared, ok := a.store.(holon.SharedStore)
	if !ok {
		return
	}
	t := time.NewTicker(shared.Lease() / 2)
	defer t.Stop()
	reg := &registrySync{a: a, unlisted: map[string]bool{}}
	st := time.NewTicker(RegistrySyncEvery)
	defer st.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-st.C:
			reg.every(ctx)
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
