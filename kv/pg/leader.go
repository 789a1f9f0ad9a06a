package pg

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"holon.dev/holon"
)

// Work that runs once across gateways (holon.Leader): each job has at
// most one leader, the gateway whose row in job_leaders has not expired
// by the database's clock. The leader renews its row every third of the
// store's lease; another gateway takes the job once the row expired. A
// leader that cannot renew stops its job before its row expires (at four
// fifths of the term, counted from when it last sent a renewal that
// succeeded, by its own clock), so two gateways never run one job at once
// while their clocks run at the same speed, whatever their offsets.

var _ holon.Leader = (*Store)(nil)

// LeadTerm is how long a dead leader keeps a job: the store's lease.
func (s *Store) LeadTerm() time.Duration { return s.lease }

// claim takes or renews job for this handle: false when another
// gateway's term has not run out.
func (s *Store) claim(ctx context.Context, job string) (bool, error) {
	var ok bool
	err := s.pool.QueryRow(ctx, `INSERT INTO job_leaders AS j (job, gateway, expires)
		VALUES ($1, $2, now() + $3 * interval '1 millisecond')
		ON CONFLICT (job) DO UPDATE SET gateway = EXCLUDED.gateway, expires = EXCLUDED.expires
		WHERE j.gateway = EXCLUDED.gateway OR j.expires < now()
		RETURNING true`, job, s.id, s.lease.Milliseconds()).Scan(&ok)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	return ok, err
}

// renewLead extends this handle's term of job: false when it holds no
// term any more (it ran out and another gateway took the job, or it was
// given up). It never takes the job afresh, so a renewal that reaches the
// database after resign (its context cancelled while the statement was
// on its way) cannot take back a job already given up.
func (s *Store) renewLead(ctx context.Context, job string) (bool, error) {
	var ok bool
	err := s.pool.QueryRow(ctx, `UPDATE job_leaders SET expires = now() + $3 * interval '1 millisecond'
		WHERE job = $1 AND gateway = $2 RETURNING true`, job, s.id, s.lease.Milliseconds()).Scan(&ok)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	return ok, err
}

// resign gives job up, so that another gateway takes it at once.
func (s *Store) resign(job string) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	s.pool.Exec(ctx, `DELETE FROM job_leaders WHERE job = $1 AND gateway = $2`, job, s.id)
}

// Lead runs fn while this gateway leads job, until ctx ends.
func (s *Store) Lead(ctx context.Context, job string, fn func(ctx context.Context)) {
	every := s.lease / 3
	for ctx.Err() == nil {
		sent := time.Now()
		if ok, _ := s.claimFor(ctx, job, every); !ok {
			select {
			case <-ctx.Done():
			case <-time.After(every):
			}
			continue
		}
		if s.leadOnce(ctx, job, fn, sent, every) {
			return
		}
	}
}

func (s *Store) claimFor(ctx context.Context, job string, within time.Duration) (bool, error) {
	cctx, cancel := context.WithTimeout(ctx, within)
	defer cancel()
	return s.claim(cctx, job)
}

// leadOnce runs fn from a claim sent at sent until the lead is lost
// (false) or fn returns or ctx ends (true: Lead is done).
func (s *Store) leadOnce(ctx context.Context, job string, fn func(ctx context.Context), sent time.Time, every time.Duration) bool {
	lctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn(lctx)
	}()
	t := time.NewTicker(every)
	defer t.Stop()
	stopBy := sent.Add(s.lease * 4 / 5)
	stop := time.NewTimer(time.Until(stopBy))
	defer stop.Stop()
	for {
		select {
		case <-done:
			s.resign(job)
			return true
		case <-ctx.Done():
			<-done
			s.resign(job)
			return true
		case <-stop.C:
			// Our term runs out before we could renew it.
			cancel()
			<-done
			return false
		case <-t.C:
		}
		at := time.Now()
		rctx, rcancel := context.WithTimeout(ctx, max(time.Millisecond, stopBy.Sub(at)))
		ok, err := s.renewLead(rctx, job)
		rcancel()
		switch {
		case ok:
			stopBy = at.Add(s.lease * 4 / 5)
			stop.Reset(time.Until(stopBy))
		case err == nil && ctx.Err() == nil:
			// Our term is gone: another gateway took the job once it
			// ran out.
			cancel()
			<-done
			return false
		}
		// A failed renewal (the database away a moment) leaves ours
		// running until stopBy.
	}
}
