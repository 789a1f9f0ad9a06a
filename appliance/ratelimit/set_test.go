package ratelimit_test

import (
	"fmt"
	"testing"
	"time"

	"golang.org/x/time/rate"

	"holon.dev/holon/appliance/ratelimit"
)

// Ensure that the limiters kept in memory stay bounded however many
// addresses come, that full (idle) buckets go first, and that a bucket
// still being drained is not forgotten while there is room.
func TestLimiterSet_Bounded(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	s := ratelimit.NewSet(ratelimit.Limit{Rate: rate.Every(time.Minute), Burst: 2}, 10, func() time.Time { return now })
	s.Allow("busy")
	s.Allow("busy")
	if ok, wait := s.Allow("busy"); ok || wait <= 0 || wait > time.Minute {
		t.Fatalf("third request of a burst of 2: ok %v, wait %s", ok, wait)
	}
	for i := 0; i < 5; i++ {
		s.Allow(fmt.Sprint("idle-", i))
	}
	if ok, _ := s.Allow("busy"); ok {
		t.Error("a drained bucket was forgotten while there was room")
	}
	for i := 0; i < 10_000; i++ {
		s.Allow(fmt.Sprint("flood-", i))
		if n := s.Size(); n > 10 {
			t.Fatalf("%d limiters kept, bound is 10", n)
		}
	}
	// Buckets that refilled completely are dropped first: they are the same
	// as new ones.
	now = now.Add(time.Hour)
	s.Allow("late")
	if n := s.Size(); n != 1 {
		t.Errorf("%d limiters after every other refilled, want 1", n)
	}
}
