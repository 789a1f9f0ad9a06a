package pg_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"holon.dev/holon"
	"holon.dev/holon/backup/pgtest"
	"holon.dev/holon/kv/pg"
)

// Ensure that a job led on two store handles (two gateways) runs on one
// of them at a time: one starts it, the other waits; when the leader dies
// (its store killed, its row left to expire) it stops the job before its
// term ran out and the other takes the job over within 1.5 terms; and a
// leader that stops hands the job over before its term ran out.
func TestLead_OnceAcrossGateways(t *testing.T) {
	url := pgtest.Start(t).CreateDB(t, "lead")
	const lease = 2 * time.Second
	open := func() *pg.Store {
		s, err := pg.OpenWith(context.Background(), url, holon.StoreOptions{NoSync: true}, pg.Options{Lease: lease})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	var running, most atomic.Int32
	started := make(chan int, 10)
	stopped := make(chan int, 10)
	job := func(i int) func(context.Context) {
		return func(ctx context.Context) {
			n := running.Add(1)
			for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
			}
			started <- i
			<-ctx.Done()
			running.Add(-1)
			stopped <- i
		}
	}
	stores := []*pg.Store{open(), open(), open()}
	var wg sync.WaitGroup
	var cancels [3]context.CancelFunc
	lead := func(i int) {
		ctx, cancel := context.WithCancel(context.Background())
		cancels[i] = cancel
		wg.Add(1)
		go func() { defer wg.Done(); stores[i].Lead(ctx, "sweep", job(i)) }()
	}
	lead(0)
	lead(1)
	first := <-started
	select {
	case i := <-started:
		t.Fatalf("the job started on %d while %d leads it", i, first)
	case <-time.After(3 * lease):
	}
	// The leader dies: its store is killed, its row left to expire.
	stores[first].Kill()
	died := time.Now()
	if i := <-stopped; i != first {
		t.Fatalf("%d stopped, want the dead leader %d", i, first)
	}
	stoppedAfter := time.Since(died)
	second := <-started
	tookOver := time.Since(died)
	if second == first || tookOver > 3*lease/2+lease/3 {
		t.Errorf("the job moved to %d %v after %d died, want the other within 1.5 leases", second, tookOver, first)
	}
	if stoppedAfter > lease {
		t.Errorf("the dead leader stopped its job %v after its last renewal could have been, past its term of %v", stoppedAfter, lease)
	}
	// A third gateway waits; the leader stops and hands the job over at
	// once (the third asks every third of a lease).
	lead(2)
	select {
	case i := <-started:
		t.Fatalf("the job started on %d while %d leads it", i, second)
	case <-time.After(lease):
	}
	cancels[second]()
	handed := time.Now()
	// Without the hand-over the third would wait for the term to run
	// out: two thirds of a lease or more after the last renewal.
	if i := <-started; i != 2 || time.Since(handed) >= 2*lease/3 {
		t.Errorf("after %d stopped, the job started on %d %v later, want the third before the stopped leader's term ran out", second, i, time.Since(handed))
	}
	for _, c := range cancels {
		c()
	}
	wg.Wait()
	if most.Load() != 1 {
		t.Errorf("the job ran %d times at once", most.Load())
	}
	for _, s := range stores {
		s.Close()
	}
}
