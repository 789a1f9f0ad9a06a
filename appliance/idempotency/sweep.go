package idempotency

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"time"

	"holon.dev/holon"
)

// DefaultTTL is how long an Idempotency-Key is kept after its call
// finished (or was interrupted) unless configured otherwise: 24 hours, as Stripe keeps its keys.
const DefaultTTL = 24 * time.Hour

// sweepChunk bounds the keys one pass of the sweep reads in a read
// transaction, and so the records one of its write transactions deletes:
// a sweep of a large index never holds the writer long.
const sweepChunk = 500

// expired reports whether a record's lifetime has passed at now: a
// finished or interrupted key lives ttl from its end (its start for a
// record without one). A running key never expires: its call may still
// settle, and the key must not run twice meanwhile.
func (d *Keys) expired(rec Record, now time.Time) bool {
	if rec.State == stateRunning {
		return false
	}
	at := rec.Started
	if rec.Finished != nil {
		at = *rec.Finished
	}
	return !now.Before(at.Add(d.ttl))
}

// Sweep deletes every finished or interrupted record whose lifetime has
// passed and returns how many it deleted. It walks the finished records
// (key/) in key order, sweepChunk at a time: each chunk is read in a
// read transaction, and only the expired keys found there are deleted in
// a write transaction of their own, each checked again there (a new claim
// may have replaced it since). Running records (run/) are never touched.
// A sweep persists nothing: a restart just walks the index again. It
// first folds the log of finished keys (log.go) into key/, deleting the
// expired ones.
func (d *Keys) Sweep(ctx context.Context) (int, error) {
	deleted, err := d.fold(ctx)
	if err != nil {
		return deleted, err
	}
	after := ""
	for {
		if err := ctx.Err(); err != nil {
			return deleted, err
		}
		now := d.now()
		var expired []string
		seen, last := 0, ""
		err := d.store.View(func(tx holon.Tx) error {
			return tx.ForEachAfter(holon.BucketIdempotency, "key/", after, func(k string, raw json.RawMessage) (bool, error) {
				seen++
				last = k
				var rec Record
				if err := json.Unmarshal(raw, &rec); err == nil && d.expired(rec, now) {
					expired = append(expired, k)
				}
				return seen < sweepChunk, nil
			})
		})
		if err != nil {
			return deleted, err
		}
		if len(expired) > 0 {
			n := 0
			err := d.store.Update(ctx, func(tx holon.Tx) error {
				n = 0
				for _, k := range expired {
					var rec Record
					err := tx.Get(holon.BucketIdempotency, k, &rec)
					if errors.Is(err, holon.ErrNotFound) {
						continue
					}
					if err != nil {
						return err
					}
					if !d.expired(rec, now) {
						continue
					}
					if err := tx.Delete(holon.BucketIdempotency, k); err != nil {
						return err
					}
					n++
				}
				return nil
			})
			if err != nil {
				return deleted, err
			}
			deleted += n
			if d.onSweep != nil {
				d.onSweep(n)
			}
		}
		if seen < sweepChunk {
			return deleted, nil
		}
		after = last
	}
}

// sweepPeriod is how often the sweep runs for a lifetime: a
// twenty-fourth of it (hourly for 24 hours), at least hourly, at most
// every second.
func sweepPeriod(ttl time.Duration) time.Duration {
	return max(min(ttl/24, time.Hour), time.Second)
}

// SweepEvery sweeps expired keys at start (those that expired while the
// gateway was stopped) and then every period (SweepEvery of the
// lifetime), until ctx ends; and folds the log of finished keys whenever
// its index is full.
func (d *Keys) SweepEvery(ctx context.Context, log *slog.Logger) {
	t := time.NewTicker(sweepPeriod(d.ttl))
	defer t.Stop()
	for {
		if n, err := d.Sweep(ctx); err != nil && ctx.Err() == nil {
			log.Error("delete expired idempotency keys", "err", err)
		} else if n > 0 {
			log.Info("deleted expired idempotency keys", "keys", n)
		}
		for folding := true; folding; {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				folding = false
			case <-d.foldNow:
				if _, err := d.fold(ctx); err != nil && ctx.Err() == nil {
					log.Error("fold the log of idempotency keys", "err", err)
				}
			}
		}
	}
}
