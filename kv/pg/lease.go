package pg

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/jackc/pgx/v5"

	"holon.dev/holon"
)

// DefaultLease is how long a gateway's lease lasts without being renewed:
// a gateway that dies has its calls in flight closed by the others once
// it ran out. The store renews it every third of it.
const DefaultLease = 15 * time.Second

// Options are the PostgreSQL store's own settings.
type Options struct {
	// Lease is how long the store's lease lasts unrenewed (DefaultLease
	// when zero).
	Lease time.Duration
	// FoldEvery is how often the leader of the job rollups_fold folds the
	// rollups' additions into their rows (250 ms when zero; never when
	// below zero, for tests).
	FoldEvery time.Duration
	// NumberBlock is the largest block of a sequence's numbers the writer
	// takes at once, NumberAge how long it hands out numbers from one
	// (numbers.go; DefaultNumberBlock and DefaultNumberAge when zero).
	NumberBlock int
	NumberAge   time.Duration
	// Turns: the gateways' writers take turns under the writers' lock
	// (doc.go), instead of running their groups at once (overlap.go).
	// Every gateway on a database must agree. HOLON_PG_TURNS=1 sets it
	// too.
	Turns bool
}

// newID names a store handle: host, process and a random part.
func newID() string {
	host, _ := os.Hostname()
	b := make([]byte, 4)
	rand.Read(b)
	return fmt.Sprintf("%s/%d/%s", host, os.Getpid(), hex.EncodeToString(b))
}

// renew takes or extends the lease, by the database's clock.
func (s *Store) renew(ctx context.Context) error {
	_, err := s.pool.Exec(ctx, `INSERT INTO gateways (id, started, expires, turns) VALUES ($1, now(), now() + $2 * interval '1 millisecond', $3)
		ON CONFLICT (id) DO UPDATE SET expires = EXCLUDED.expires`, s.id, s.lease.Milliseconds(), !s.overlap)
	return err
}

// sameMode refuses a store whose writer would take turns while another
// live gateway's overlaps, or the other way round (migration 28): both
// must read the writers' log alike. Its lease, taken first, is given back.
func (s *Store) sameMode(ctx context.Context) error {
	var other string
	err := s.pool.QueryRow(ctx, `SELECT id FROM gateways WHERE expires > now() AND id <> $1 AND turns <> $2 ORDER BY id LIMIT 1`,
		s.id, !s.overlap).Scan(&other)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil
	}
	if err != nil {
		return err
	}
	s.pool.Exec(ctx, `DELETE FROM gateways WHERE id = $1`, s.id)
	mode := func(turns bool) string {
		if turns {
			return "takes turns under the writers' lock (HOLON_PG_TURNS=1)"
		}
		return "overlaps with the others (HOLON_PG_TURNS unset)"
	}
	return fmt.Errorf("gateway %s on this database %s, and this one's writer %s: start every gateway on one database the same way (stop them all to change it; a stopped gateway's lease runs out in %s)",
		other, mode(s.overlap), mode(!s.overlap), s.lease)
}

// claimChain takes the journal's chain the writer extends: the lowest
// whose gateway holds no live lease (it closed, or died and its lease ran
// out), or a new one. Each gateway's writer thus chains its entries
// without waiting for another's head, and a cluster holds about as many
// chains as it ever ran gateways at once. A gateway whose lease ran out
// while it still ran may find its chain claimed by another: both then
// extend it under the writers' lock, each chaining on the other's head
// once the log shows it moved, its entries numbered from a block taken
// after (numbers.go), so that it stays one chain in the order of its
// numbers.
func (s *Store) claimChain(ctx context.Context) error {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, `LOCK TABLE journal_chains IN EXCLUSIVE MODE`); err != nil {
		return err
	}
	var n int
	err = tx.QueryRow(ctx, `SELECT c.n FROM journal_chains c
		WHERE NOT EXISTS (SELECT 1 FROM gateways g WHERE g.id = c.gateway AND g.expires > now())
		ORDER BY c.n LIMIT 1`).Scan(&n)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		err = tx.QueryRow(ctx, `INSERT INTO journal_chains (n, gateway) SELECT COALESCE(max(n) + 1, 0), $1 FROM journal_chains RETURNING n`, s.id).Scan(&n)
	case err == nil:
		_, err = tx.Exec(ctx, `UPDATE journal_chains SET gateway = $1 WHERE n = $2`, s.id, n)
	}
	if err != nil {
		return err
	}
	if err := tx.Commit(ctx); err != nil {
		return err
	}
	s.chain, s.headKey = n, holon.JournalHeadKey(n)
	return nil
}

// Chain is the journal's chain this store handle's writer extends
// (holon.JournalHeadKey).
func (s *Store) Chain() int { return s.chain }

// keepLease renews the lease until the store closes or is killed.
func (s *Store) keepLease() {
	defer close(s.leaseDone)
	t := time.NewTicker(s.lease / 3)
	defer t.Stop()
	for {
		select {
		case <-s.stopLease:
			return
		case <-t.C:
			ctx, cancel := context.WithTimeout(context.Background(), s.lease/3)
			s.renew(ctx) // a failure is retried next tick; the lease runs out if they go on
			cancel()
		}
	}
}

// Lease is how long the store's lease lasts unrenewed: the gateway
// closes the calls of a dead one within it and one pass of its recovery
// (holon.SharedStore).
func (s *Store) Lease() time.Duration { return s.lease }

// ID names this store handle in the gateways table.
func (s *Store) ID() string { return s.id }

// Kill stops the store as a crash would, for drills and tests: no update
// runs any more, and its lease is left to run out rather than given
// back, so its calls in flight stay its own until then.
func (s *Store) Kill() {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	s.closed = true
	close(s.queue)
	s.mu.Unlock()
	close(s.stopLease)
	<-s.leaseDone
	<-s.done
	s.nums.stopTakes()
	s.pool.Close()
}

// Orphaned reports whether the call in flight under receipt is held by no
// running gateway (holon.SharedTx): its gateway's lease ran out or was
// given back, or it has none.
func (t *Tx) Orphaned(receipt string) (bool, error) {
	var live bool
	err := t.one(`SELECT EXISTS (SELECT 1 FROM holds h JOIN gateways g ON g.id = h.gateway
		WHERE h.receipt = $1 AND g.expires > now())`, []any{receipt}, &live)
	return !live, err
}
