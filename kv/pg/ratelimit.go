package pg

import (
	"context"

	"holon.dev/holon"
)

// Rate limits' token buckets (holon.SharedLimits), in rate_buckets: one
// row per key, taken from by take_token under the row's lock, so that
// every gateway on the database takes from the same bucket.

var _ holon.SharedLimits = (*Store)(nil)

// TakeToken takes one token from key's bucket in one round trip, by the
// database's clock, and returns what the bucket held before: under 1,
// nothing was taken. It does not go through the writer: a rate limit
// must not wait behind the calls' commits, nor they behind it.
func (s *Store) TakeToken(ctx context.Context, key string, rate float64, burst int) (float64, error) {
	var held float64
	err := s.pool.QueryRow(ctx, `SELECT take_token($1, $2, $3)`, key, rate, float64(burst)).Scan(&held)
	return held, unavailable(err)
}

// ForgetFullBuckets deletes the buckets that are full again: forgetting
// them changes nothing, as a new bucket starts full.
func (s *Store) ForgetFullBuckets(ctx context.Context) (int, error) {
	tag, err := s.pool.Exec(ctx, `DELETE FROM rate_buckets
		WHERE tokens + rate * EXTRACT(EPOCH FROM clock_timestamp() - at) >= burst`)
	return int(tag.RowsAffected()), unavailable(err)
}
