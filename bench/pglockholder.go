package bench

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// lockHolder samples, every millisecond, what the server process that
// holds the writers' lock (writer_log's table lock, the PostgreSQL
// store's turn) is doing: its state, what it waits for and the statement
// it runs or ran last (Options.PGLockHolder). The samples say where a
// turn's time goes on the server's side: waiting for its gateway (idle
// in transaction), running a statement, flushing the COMMIT.
type lockHolder struct {
	url string // the database the gateways serve from
}

// lockSamples counts samples by what the holder did ("" when no process
// held the lock).
type lockSamples map[string]int

// around samples while block runs, adding to into.
func (h *lockHolder) around(ctx context.Context, into lockSamples, block func() error) error {
	if h == nil {
		return block()
	}
	c, err := pgx.Connect(ctx, h.url)
	if err != nil {
		return err
	}
	defer c.Close(context.Background())
	sctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- sampleHolder(sctx, c, into) }()
	berr := block()
	stop()
	return errors.Join(berr, <-done)
}

// sampleHolder samples until ctx ends.
func sampleHolder(ctx context.Context, c *pgx.Conn, into lockSamples) error {
	t := time.NewTicker(time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		var state, wait, query string
		err := c.QueryRow(ctx, `SELECT coalesce(a.state, ''), coalesce(a.wait_event_type || '/' || a.wait_event, ''), a.query
			FROM pg_locks l JOIN pg_stat_activity a USING (pid)
			WHERE l.relation = 'writer_log'::regclass AND l.mode = 'ExclusiveLock' AND l.granted`).Scan(&state, &wait, &query)
		switch {
		case errors.Is(err, pgx.ErrNoRows):
			into[""]++
		case ctx.Err() != nil:
			return nil
		case err != nil:
			return fmt.Errorf("sampling the writers' lock holder: %w", err)
		default:
			into[holderKey(state, wait, query)]++
		}
	}
}

// holderKey names a sample: the state, the wait if any, and the
// statement's first words.
func holderKey(state, wait, query string) string {
	words := strings.Fields(query)
	text := strings.Join(words[:min(4, len(words))], " ")
	if wait != "" {
		return fmt.Sprintf("%s, waiting for %s: %s", state, wait, text)
	}
	return fmt.Sprintf("%s: %s", state, text)
}

// note says what share of the samples each of the top kinds took.
func (s lockSamples) note(top int) string {
	all := 0
	for _, n := range s {
		all += n
	}
	keys := slices.SortedFunc(maps.Keys(s), func(a, b string) int {
		if s[a] != s[b] {
			return s[b] - s[a]
		}
		return strings.Compare(a, b)
	})
	parts := make([]string, 0, top)
	for _, k := range keys[:min(top, len(keys))] {
		name := k
		if k == "" {
			name = "no one held it"
		}
		parts = append(parts, fmt.Sprintf("%.1f%% %s", 100*float64(s[k])/float64(max(all, 1)), name))
	}
	return fmt.Sprintf("what the server process holding the writers' lock did, %d samples a millisecond apart in the row's blocks: %s", all, strings.Join(parts, "; "))
}
