package ops

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"holon.dev/holon"
)

// CheckStore proves the store still answers: a read transaction, then an
// empty update through the writer (the group commit that every settlement
// takes), which waits for the writer however long it takes. A store whose
// writer is stuck never returns, so a watchdog that pings only after this
// returns nil lets systemd restart a gateway that can no longer settle.
func CheckStore(ctx context.Context, store holon.Store) error {
	err := store.View(func(tx holon.Tx) error {
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
	if err := store.Update(ctx, func(holon.Tx) error { return nil }); err != nil {
		return fmt.Errorf("store check, write: %w", err)
	}
	return nil
}

// Watchdog pings systemd's watchdog every interval, each time right after
// CheckStore succeeds, until ctx ends. A failed check is logged and not
// pinged: systemd then stops the gateway (WatchdogSec) and restarts it.
// A PostgreSQL store that cannot be reached (store_unavailable) is pinged
// all the same: the gateway itself is well, and recovers on its own.
func Watchdog(ctx context.Context, store holon.Store, n *Notifier, every time.Duration, log *slog.Logger) {
	if every <= 0 || !n.Enabled() {
		return
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		err := CheckStore(ctx, store)
		if holon.ErrorCode(err) == holon.CodeStoreUnavailable {
			// A database that cannot be reached: the gateway answers 503
			// and reconnects on its own, which a restart would not do
			// better (it could not even start).
			log.Warn("watchdog: the database cannot be reached; the gateway answers 503 until it is back", "err", err)
			err = nil
		}
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			log.Error("watchdog: the store does not answer; not pinging systemd", "err", err)
		} else if err := n.Notify("WATCHDOG=1"); err != nil {
			log.Warn("watchdog ping", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
