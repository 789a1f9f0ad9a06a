package ratelimit_test

import (
	"context"
	"testing"
	"time"

	"golang.org/x/time/rate"

	"holon.dev/holon"
	"holon.dev/holon/appliance/ratelimit"
	"holon.dev/holon/backup/pgtest"
	"holon.dev/holon/kv/pg"
)

// Ensure that a limit kept in PostgreSQL falls back to the gateway's own
// bucket while the database is down, without lifting it: with the server
// crashed, a burst of 5 admits 5 and refuses the sixth with a wait (each
// answer well within the take's timeout); once the server is back, the
// database's bucket decides again (it was never drained, so it admits).
func TestShared_FallsBackWhileTheDatabaseIsDown(t *testing.T) {
	srv := pgtest.StartCrashable(t)
	url := srv.CreateDB(t, "limits")
	st, err := pg.Open(context.Background(), url, holon.StoreOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	l := ratelimit.Limit{Rate: rate.Every(time.Hour), Burst: 5}
	s := ratelimit.NewShared(st, "account:", l, ratelimit.NewSet(l, 100, time.Now))
	// The shared bucket works, and takes the first token.
	if ok, _ := s.Allow("ann"); !ok {
		t.Fatal("the first request with the database up was refused")
	}
	if err := srv.Crash(); err != nil {
		t.Fatal(err)
	}
	for i := range 6 {
		start := time.Now()
		ok, wait := s.Allow("ann")
		took := time.Since(start)
		if took > ratelimit.TakeTimeout+time.Second {
			t.Errorf("request %d with the database down took %s", i+1, took)
		}
		if want := i < 5; ok != want || !ok && wait <= 0 {
			t.Errorf("request %d with the database down: allowed %v (wait %s), want %v: the gateway's own bucket of 5 decides", i+1, ok, wait, want)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := srv.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		ok, _ := s.Allow("ann")
		if ok {
			break // the database's bucket, which held 4
		}
		if time.Now().After(deadline) {
			t.Fatal("with the database back, the shared bucket never decided again")
		}
		time.Sleep(100 * time.Millisecond)
	}
}
