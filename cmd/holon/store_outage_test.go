package main

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"holon.dev/holon"
	"holon.dev/holon/backup/pgtest"
	"holon.dev/holon/gateway/storetest"
	"holon.dev/holon/journal"
	"holon.dev/holon/kv/pg"
)

// outageLoad is calls sent without pause to one gateway, and what each
// was answered.
type outageLoad struct {
	api string
	// paused holds the workers back while set; sending counts the workers
	// past their look at it (a call of theirs may be on its way).
	paused  atomic.Bool
	sending atomic.Int64
	mu      sync.Mutex
	ok      map[string]bool // receipts answered 200
	n503    atomic.Int64
	// n403 counts the calls refused insufficient_funds: the load spends
	// the payer's credit, and once it is spent that is the right answer
	// (the test then checks the balance really is spent, never below zero).
	n403 atomic.Int64
	bad  []string // answers neither 200, 503 store_unavailable nor 403 insufficient_funds
}

func (l *outageLoad) run(t *testing.T, ctx context.Context, workers int) *sync.WaitGroup {
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ctx.Err() == nil; i++ {
				l.sending.Add(1)
				if l.paused.Load() {
					l.sending.Add(-1)
					time.Sleep(5 * time.Millisecond)
					continue
				}
				code, out := postCallTo(t, l.api, "ops/test", "ops-test/slow", map[string]any{"ms": i % 20, "word": fmt.Sprintf("w%d-%d", w, i)})
				l.sending.Add(-1)
				if l.took(code, out) == http.StatusServiceUnavailable {
					time.Sleep(10 * time.Millisecond)
				}
			}
		}()
	}
	return &wg
}

func (l *outageLoad) took(code int, out map[string]any) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	errCode := ""
	if e, ok := out["error"].(map[string]any); ok {
		errCode, _ = e["code"].(string)
	}
	switch {
	case code == http.StatusOK:
		l.ok[out["receipt"].(map[string]any)["id"].(string)] = true
	case code == http.StatusServiceUnavailable && errCode == holon.CodeStoreUnavailable:
		l.n503.Add(1)
	case code == http.StatusForbidden && errCode == holon.CodeInsufficientFunds:
		l.n403.Add(1)
	default:
		if len(l.bad) < 5 {
			l.bad = append(l.bad, fmt.Sprintf("%d %v", code, out))
		}
	}
	return code
}

// Ensure that a gateway on PostgreSQL answers 503 store_unavailable while
// the database is down (pg_ctl stop -m immediate under load), never a
// false 200 and never stopping, and serves again on its own once the
// database is back: a call whose agent was running when the database went
// away settles billed when the database is back within the settlement's
// wait, and is answered 503 and closed failed, unbilled, when it is not;
// every call answered 200 is in the store, billed, once; no hold is left
// and the money adds up.
func TestServe_PostgresDown_Answers503AndRecovers(t *testing.T) {
	srv := pgtest.StartCrashable(t)
	url := srv.CreateDB(t, "outage")
	registry, mandates := opsDirs(t)
	rs := startServe(t, map[string]string{"HOLON_REGISTRY": registry}, "--addr", "127.0.0.1:0",
		"--db", filepath.Join(t.TempDir(), "holon.db"), "--mandates", mandates, "--store", url)
	api := rs.addrs["api"]
	s, err := pg.Open(context.Background(), url, holon.StoreOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	holds := func() []*holon.Hold { return heldIn(t, s) }
	l := &outageLoad{api: api, ok: map[string]bool{}}
	ctx, stop := context.WithCancel(context.Background())
	wg := l.run(t, ctx, 6)

	// outage keeps PostgreSQL down for down, a call of long ms running
	// across it, and returns that call's answer and receipt.
	type answer struct {
		code int
		out  map[string]any
		id   string
	}
	answered := func() int {
		l.mu.Lock()
		defer l.mu.Unlock()
		return len(l.ok)
	}
	outage := func(long, down time.Duration) answer {
		// Calls answered before the outage: at least 30 more.
		from := answered()
		for deadline := time.Now().Add(60 * time.Second); answered() < from+30; time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("only %d calls answered 200 in 60s before the outage", answered()-from)
			}
		}
		// The long call alone in flight, to know its receipt.
		l.paused.Store(true)
		for deadline := time.Now().Add(10 * time.Second); l.sending.Load() > 0 || len(holds()) > 0; time.Sleep(5 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatal("the calls in flight did not end")
			}
		}
		longDone := make(chan answer, 1)
		go func() {
			sent := time.Now()
			// Keyed: its reservation, so its receipt, is in the
			// database while it runs (postKeyedCallTo).
			code, out := postKeyedCallTo(t, api, "ops/test", "ops-test/slow", fmt.Sprintf("across-%d", down), map[string]any{"ms": long.Milliseconds(), "word": "across"})
			t.Logf("the call across the outage: %d after %v", code, time.Since(sent).Round(time.Millisecond))
			longDone <- answer{code: code, out: out}
		}()
		var hs []*holon.Hold
		for deadline := time.Now().Add(10 * time.Second); len(hs) == 0; time.Sleep(5 * time.Millisecond) {
			if hs = holds(); time.Now().After(deadline) {
				t.Fatal("the long call did not start")
			}
		}
		l.paused.Store(false)
		time.Sleep(200 * time.Millisecond)
		if err := srv.Crash(); err != nil {
			t.Fatal(err)
		}
		crashed := time.Now()
		// A call sent while the database is down is answered 503 at once
		// (its admission cannot be read). The load's own calls cannot
		// show it: at the crash, each worker's call may be running its
		// agent, and then it waits for the settlement. Nor can a call sent
		// in the first 50 ms: an in-process call's admission may still be
		// read from the writer's memory then (the gateway's recentMaxAge,
		// the committed state no older than that), and that call too runs
		// and waits for its settlement (settleOutageWait) before its 503.
		time.Sleep(100 * time.Millisecond)
		code, out := postCallTo(t, api, "ops/test", "ops-test/slow", map[string]any{"ms": 0, "word": "down"})
		e, _ := out["error"].(map[string]any)
		if took := time.Since(crashed); l.took(code, out) != http.StatusServiceUnavailable || e == nil || e["code"] != holon.CodeStoreUnavailable {
			t.Errorf("a call sent while PostgreSQL was down: %d %v, want 503 store_unavailable", code, out)
		} else if took >= down {
			t.Errorf("a call sent while PostgreSQL was down was answered 503 only after %v, when it was back", took.Round(time.Millisecond))
		}
		time.Sleep(down - time.Since(crashed))
		if err := srv.Restart(context.Background()); err != nil {
			t.Fatal(err)
		}
		back := time.Now()
		for {
			code, out := postCallTo(t, api, "ops/test", "ops-test/slow", map[string]any{"ms": 0, "word": "back"})
			if code == http.StatusOK {
				t.Logf("PostgreSQL down %v: the gateway served again %v after it was back", down, time.Since(back).Round(time.Millisecond))
				break
			}
			if time.Since(back) > 10*time.Second {
				t.Fatalf("the gateway did not serve again within 10s of PostgreSQL's return: %d %v\n%s", code, out, rs.stderr.String())
			}
			time.Sleep(20 * time.Millisecond)
		}
		a := <-longDone
		a.id = hs[0].Receipt
		return a
	}

	// Back within the settlement's wait: the call across it settles.
	a := outage(1500*time.Millisecond, time.Second)
	if a.code != http.StatusOK {
		t.Errorf("a call running while PostgreSQL was down 1s: %d %v, want 200 once it was back", a.code, a.out)
	} else {
		l.took(a.code, a.out)
	}
	// Away longer: the call is answered 503, naming its receipt.
	b := outage(time.Second, 8*time.Second)
	cut := b.id
	if e, _ := b.out["error"].(map[string]any); b.code != http.StatusServiceUnavailable || e == nil || e["code"] != holon.CodeStoreUnavailable {
		t.Errorf("a call running while PostgreSQL was down 8s: %d %v, want 503 store_unavailable", b.code, b.out)
	} else if msg, _ := e["message"].(string); !strings.Contains(msg, "receipt "+cut+" ") {
		t.Errorf("the 503 of a call that ran does not name its receipt %s: %q", cut, msg)
	}
	time.Sleep(500 * time.Millisecond)
	stop()
	wg.Wait()
	select {
	case err := <-rs.done:
		t.Fatalf("the gateway stopped: %v", err)
	default:
	}
	// The closing of the call answered 503 runs once a second.
	time.Sleep(1500 * time.Millisecond)
	rs.stop(t)

	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.bad) > 0 {
		t.Errorf("answers neither 200, 503 store_unavailable nor 403 insufficient_funds: %v", l.bad)
	}
	t.Logf("%d calls answered 200, %d answered 503 store_unavailable, %d 403 insufficient_funds", len(l.ok), l.n503.Load(), l.n403.Load())
	if len(l.ok) < 50 {
		t.Errorf("only %d calls answered 200: too little load to mean anything", len(l.ok))
	}
	err = s.View(func(tx holon.Tx) error {
		for id := range l.ok {
			r, err := tx.Receipt(id)
			if err != nil {
				return fmt.Errorf("answered 200: %s: %w", id, err)
			}
			row, err := tx.EntryByKey("settle:" + id)
			if r.Status != holon.StatusSucceeded || !r.Billed || err != nil || row.Key == "" {
				t.Errorf("answered 200 but stored %s billed=%v, settle entry %v", r.Status, r.Billed, err)
			}
		}
		if cut != "" {
			r, err := tx.Receipt(cut)
			if err != nil {
				return fmt.Errorf("the call answered 503: %s: %w", cut, err)
			}
			if r.Status != holon.StatusFailed || r.Billed || tx.HasEntry("settle:"+cut) {
				t.Errorf("the call answered 503 (%s) is %s billed=%v", cut, r.Status, r.Billed)
			}
		}
		if l.n403.Load() > 0 {
			// Refused for want of money: the payer's credit is spent
			// (less than a call's price is left), and not overspent
			// (storetest.CheckMoney below).
			if a, err := tx.Account("ops"); err != nil || a.Available() >= journal.MustParseAmount("0.01") {
				t.Errorf("%d calls refused insufficient_funds while ops has %s available (%v)", l.n403.Load(), a.Available(), err)
			}
		}
		hs, err := tx.Holds()
		if len(hs) > 0 {
			t.Errorf("%d holds left, first %+v", len(hs), *hs[0])
		}
		if err != nil {
			return err
		}
		return tx.(*pg.Tx).VerifyJournal()
	})
	if err != nil {
		t.Fatal(err)
	}
	storetest.CheckMoney(t, s)
}

// Ensure that a gateway whose lease lapsed while it lived (a long pause),
// and whose call in flight another gateway therefore closed (failed
// gateway_restarted, unbilled), neither bills that call when its agent
// answers nor stops: it answers the caller with the receipt as it was
// closed, and serves on.
func TestServe_LapsedLease_CallClosedByAnotherIsAnsweredAsClosed(t *testing.T) {
	srv := pgtest.Start(t)
	url := srv.CreateDB(t, "lapsed")
	registry, mandates := opsDirs(t)
	env := map[string]string{"HOLON_REGISTRY": registry}
	args := func() []string {
		// A lease of an hour: renewed every 20 minutes, so the one the
		// test lapses stays lapsed for the test.
		return []string{"--addr", "127.0.0.1:0", "--db", filepath.Join(t.TempDir(), "holon.db"), "--mandates", mandates,
			"--store", url, "--store-lease", "1h"}
	}
	paused := startServe(t, env, args()...)
	type answer struct {
		code int
		out  map[string]any
	}
	done := make(chan answer, 1)
	go func() {
		// Long enough for the second gateway to start and close it first
		// on a loaded machine (two seconds were not, once, with the other
		// test packages running beside this one).
		code, out := postKeyedCallTo(t, paused.addrs["api"], "ops/test", "ops-test/slow", "paused", map[string]any{"ms": 6000, "word": "paused"})
		done <- answer{code, out}
	}()
	s, err := pg.Open(context.Background(), url, holon.StoreOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var held []*holon.Hold
	for deadline := time.Now().Add(10 * time.Second); len(held) == 0; time.Sleep(10 * time.Millisecond) {
		if held = heldIn(t, s); time.Now().After(deadline) {
			t.Fatal("the call never started")
		}
	}
	cut := held[0].Receipt
	// The paused gateway's lease lapses (and this test's handle's with it);
	// a gateway that starts now closes its call.
	conn := srv.Connect(t, url)
	if _, err := conn.Exec(context.Background(), `UPDATE gateways SET expires = now() - interval '1 second'`); err != nil {
		t.Fatal(err)
	}
	other := startServe(t, env, args()...)
	var r *holon.Receipt
	if err := s.View(func(tx holon.Tx) (err error) { r, err = tx.Receipt(cut); return err }); err != nil {
		t.Fatal(err)
	}
	if r.Status != holon.StatusFailed || r.Error == nil || *r.Error != holon.CodeGatewayRestarted {
		t.Fatalf("the starting gateway left the lapsed one's call %s %v", r.Status, r.Error)
	}

	a := <-done
	rec, _ := a.out["receipt"].(map[string]any)
	if a.code != http.StatusInternalServerError || rec == nil || rec["id"] != cut || rec["status"] != "failed" ||
		rec["error"] != holon.CodeGatewayRestarted || rec["billed"] != false {
		t.Errorf("the lapsed gateway answered its closed call %d %v, want 500 with the receipt as closed (failed gateway_restarted, unbilled)", a.code, a.out)
	}
	select {
	case err := <-paused.done:
		t.Fatalf("the lapsed gateway stopped: %v\n%s", err, paused.stderr.String())
	default:
	}
	for _, rs := range []*runningServe{paused, other} {
		if code, out := postCallTo(t, rs.addrs["api"], "ops/test", "ops-test/slow", map[string]any{"ms": 0, "word": "on"}); code != http.StatusOK {
			t.Errorf("a call afterwards: %d %v", code, out)
		}
	}
	paused.stop(t)
	other.stop(t)
	err = s.View(func(tx holon.Tx) error {
		if tx.HasEntry("settle:" + cut) {
			t.Errorf("the closed call %s was billed", cut)
		}
		hs, err := tx.Holds()
		if len(hs) > 0 {
			t.Errorf("%d holds left", len(hs))
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	storetest.CheckMoney(t, s)
}
