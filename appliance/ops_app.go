package appliance

import (
	"context"
	"errors"
	"fmt"
	"holon.dev/holon"
	"holon.dev/holon/appliance/ops"
	"net/http"
	"time"
)

// CheckStore proves the store still answers: a read transaction, then an
// empty update through the writer (the group commit that every settlement
// takes), which waits for the writer however long it takes. A store whose
// writer is stuck never returns, so a watchdog that pings only after this
// returns nil lets systemd restart a gateway that can no longer settle.
func (a *App) CheckStore(ctx context.Context) error {
	err := a.store.View(func(tx holon.Tx) error {
		var v struct{}
		err := tx.Get(holon.BucketSettings, "watchdog", &v)
		if errors.Is(err, holon.ErrNotFound) {
			return nil
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("store check, read: %w", err)
	}
	if err := a.store.Update(ctx, func(holon.Tx) error { return nil }); err != nil {
		return fmt.Errorf("store check, write: %w", err)
	}
	return nil
}

// Watchdog pings systemd's watchdog every interval, each time right after
// CheckStore succeeds, until ctx ends. A failed check is logged and not
// pinged: systemd then stops the gateway (WatchdogSec) and restarts it.
// A PostgreSQL store that cannot be reached (store_unavailable) is pinged
// all the same: the gateway itself is well, and recovers on its own.
func (a *App) Watchdog(ctx context.Context, n *ops.Notifier, every time.Duration) {
	if every <= 0 || !n.Enabled() {
		return
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		err := a.CheckStore(ctx)
		if holon.ErrorCode(err) == holon.CodeStoreUnavailable {
			// A database that cannot be reached: the gateway answers 503
			// and reconnects on its own, which a restart would not do
			// better (it could not even start).
			a.log.Warn("watchdog: the database cannot be reached; the gateway answers 503 until it is back", "err", err)
			err = nil
		}
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			a.log.Error("watchdog: the store does not answer; not pinging systemd", "err", err)
		} else if err := n.Notify("WATCHDOG=1"); err != nil {
			a.log.Warn("watchdog ping", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// HoldsOpen counts the calls in flight: reserved, not settled (their
// holds in the store or in the engine's memory).
func (a *App) HoldsOpen() (int, error) {
	return ops.HoldsOpen(a.store, a.inMemory)
}

// MetricsHandler serves the appliance's metrics with no authentication,
// for a listener of their own (holon serve --metrics-addr, loopback by
// default).
func (a *App) MetricsHandler() http.Handler { return a.metrics.Handler(a.log) }

// inMemory counts the calls whose hold the engine keeps in memory (not in
// the store's holds) until they settle.
func (a *App) inMemory() int {
	if a.engine == nil {
		return 0
	}
	return a.engine.InFlight()
}
