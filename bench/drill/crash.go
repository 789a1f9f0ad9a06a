package drill

import (
	"context"
	"errors"
	"fmt"
	"holon.dev/holon"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"holon.dev/holon/journal"
)

// crashDrill runs the real gateway under concurrent load (plain, slow,
// delegated, approved and idempotent calls, retried when the gateway
// vanished, and refunds of them: refunds.go) and SIGKILLs it at random moments, restarting it on the same
// store each time. While it is down, the store is checked (holon verify,
// and the calls in flight at the kill are noted); after each restart the API
// is; at the end, every answer the clients were given is held against the
// store and against what the agents executed.
func crashDrill(ctx context.Context, d *drill) error {
	kills := pick(d.o.Kills, d.o.Long, 20, 100)
	clients := pick(d.o.Clients, d.o.Long, 12, 32)
	maxUp := pick(d.o.Duration/time.Duration(max(kills, 1)), d.o.Long, 700*time.Millisecond, 2*time.Second)
	rng := rand.New(rand.NewPCG(uint64(d.o.Seed), 1))

	agents, registry, err := d.startStandardAgents()
	if err != nil {
		return err
	}
	defer agents.close()
	g, err := d.serve(ctx, registry, nil)
	if err != nil {
		return err
	}
	defer g.kill()
	db := g.db
	c := newAPI(g.url, clients*2)
	acc, totals, err := c.crasher(ctx, g.adminKey)
	if err != nil {
		return err
	}

	refunds, err := d.withRefunds(ctx, g, c, agents, registry, acc, []string{"crasher/main", "crasher/tight"})
	if err != nil {
		return err
	}

	l := newCrashLoad(d, []*api{c}, acc, agents)
	l.onPaid = refunds.offer
	loadCtx, stopLoad := context.WithCancel(ctx)
	var wg sync.WaitGroup
	l.start(loadCtx, &wg, clients)
	refunds.start(loadCtx, &wg, max(clients/6, 2))

	// inFlight are the receipts that held money at the last kill: the
	// restart must close them as gateway_restarted, unbilled.
	var inFlight []string
	for k := range kills {
		up := time.Duration(100+rng.IntN(int(maxUp/time.Millisecond))) * time.Millisecond
		select {
		case <-time.After(up):
		case <-ctx.Done():
			stopLoad()
			wg.Wait()
			return ctx.Err()
		case <-g.done():
			stopLoad()
			wg.Wait()
			return fmt.Errorf("the gateway exited on its own before kill %d: %v\n%s", k+1, g.exitErr(), tail(g.logs(), 2000))
		}
		g.kill()
		d.count("SIGKILLs survived (restarted on the same store)", 1)
		out, err := verifyStore(ctx, d.o.Holon, db)
		d.check("holon verify passes", err == nil, "after kill %d: %v\n%s", k+1, err, tail(out, 1500))
		v, err := readStore(db)
		if err != nil {
			stopLoad()
			wg.Wait()
			return fmt.Errorf("read the store after kill %d: %w", k+1, err)
		}
		d.checkRestarted(v, inFlight, k)
		d.checkRefunds(v)
		inFlight = inFlight[:0]
		for _, h := range v.holds {
			inFlight = append(inFlight, h.Receipt)
		}
		d.count("calls in flight at a kill", int64(len(inFlight)))
		if err := g.start(ctx); err != nil {
			stopLoad()
			wg.Wait()
			return fmt.Errorf("restart %d: %w", k+1, err)
		}
		if err := l.checkAPI(ctx, c, totals); err != nil {
			stopLoad()
			wg.Wait()
			return err
		}
	}
	// Let the load run a moment on the last start, then stop it, let the
	// calls drain and stop the gateway cleanly.
	time.Sleep(300 * time.Millisecond)
	stopLoad()
	wg.Wait()
	if err := g.stop(); err != nil {
		return err
	}
	v, err := d.checkStore(ctx, db, totals)
	if err != nil {
		return err
	}
	d.checkRestarted(v, inFlight, kills)
	l.checkAnswers(v, agents)
	d.checkRefundedMoney(v, acc.handle, totals)
	refunds.checkAnswered(v)
	d.floor("calls answered 200", int64(5*kills))
	d.floor("calls in flight at a kill", int64(max(kills/4, 1)))
	d.floor("approvals decided", 1)
	d.floor("idempotent calls re-sent after their 200", 1)
	d.floor("refunds answered 201", int64(kills))
	d.floor("refunds answered 201 by the author", 1)
	return nil
}

// checkRestarted checks, on the store of a gateway down again, the calls
// that were in flight at the kill before: closed as failed/gateway_restarted
// by the restart (or by another gateway once the lease ran out), never
// billed, holding nothing. On PostgreSQL, a call whose reservation's
// answer was lost in a crash of the database may have been closed
// failed/store_unavailable by the killed gateway itself, its closing
// commit reaching the database as the kill did: closed unsettled too
// (holon.ClosedUnsettled).
func (d *drill) checkRestarted(v *storeView, inFlight []string, kill int) {
	holding := map[string]bool{}
	for _, h := range v.holds {
		holding[h.Receipt] = true
	}
	for _, id := range inFlight {
		r := v.receipts[id]
		ok := r != nil && r.Status == "failed" && r.Error != nil && holon.ClosedUnsettled(*r.Error) && !r.Billed && v.settles[id] == 0
		detail := "missing"
		if r != nil {
			detail = fmt.Sprintf("%s/%v billed=%v settles=%d", r.Status, deref(r.Error), r.Billed, v.settles[id])
		}
		d.check("a call in flight at a kill is closed failed/gateway_restarted (or store_unavailable), unbilled", ok, "%s after kill %d: %s", id, kill, detail)
		d.check("no hold survives a restart", !holding[id], "%s still holds after kill %d", id, kill)
	}
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// crashLoad is the crash drill's clients and what they were answered.
// With several gateways (the cluster drill), each call goes to one at
// random, and its retries, re-sends and approval to the next ones.
type crashLoad struct {
	d      *drill
	apis   []*api
	acc    *account
	agents *agentServer
	seq    atomic.Int64
	// internal counts the answers 500 (the first few are noted).
	internal atomic.Int64

	mu sync.Mutex
	// answered maps the receipt of every 200 to its cost.
	answered map[string]string
	// idem maps each Idempotency-Key to its nonce.
	idem map[string]string
	// recent are receipts answered 200 since the last restart check.
	recent []string
	// onPaid, when set, is told every receipt answered 200 (the crash
	// drill's refunds).
	onPaid func(*receipt)
	// local, when set, is an agent that runs inside the gateway (a dev
	// runtime): spend calls it half the time, so that the spender's
	// balance is also spent by calls whose reservations live in the
	// gateway's memory. The webhook agents' records cannot show its runs.
	local string
}

func newCrashLoad(d *drill, apis []*api, acc *account, agents *agentServer) *crashLoad {
	return &crashLoad{d: d, apis: apis, acc: acc, agents: agents, answered: map[string]string{}, idem: map[string]string{}}
}

// start starts clients workers (wg counts them) until ctx ends.
func (l *crashLoad) start(ctx context.Context, wg *sync.WaitGroup, clients int) {
	for w := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l.worker(ctx, rand.New(rand.NewPCG(uint64(l.d.o.Seed), uint64(w)+2)))
		}()
	}
}

func (l *crashLoad) nonce(kind string) string {
	return fmt.Sprintf("%s-%d", kind, l.seq.Add(1))
}

// at is the gateway the n-th attempt of a call that started on gateway g
// goes to.
func (l *crashLoad) at(g, n int) *api { return l.apis[(g+n)%len(l.apis)] }

func (l *crashLoad) worker(ctx context.Context, rng *rand.Rand) {
	for ctx.Err() == nil {
		g := rng.IntN(len(l.apis))
		switch p := rng.IntN(100); {
		case p < 25:
			l.plain(ctx, g, "crasher/main", "drill/echo", agentInput{N: l.nonce("echo")})
		case p < 45:
			l.plain(ctx, g, "crasher/main", "drill/slow", agentInput{N: l.nonce("slow"), MS: 50 + rng.IntN(1500)})
		case p < 60:
			l.plain(ctx, g, "crasher/main", "drill/orch", agentInput{N: l.nonce("orch")})
		case p < 85:
			agent, in := "drill/echo", agentInput{N: l.nonce("idem")}
			if rng.IntN(2) == 0 {
				agent, in.MS = "drill/slow", 50+rng.IntN(1000)
			}
			l.idempotent(ctx, g, agent, in)
		case p < 93:
			l.approved(ctx, g)
		default:
			l.plain(ctx, g, "crasher/tight", "drill/echo", agentInput{N: l.nonce("tight")})
		}
	}
}

// plain makes one call on gateway g; an answer lost to a kill is not
// retried (the call is another one next time).
func (l *crashLoad) plain(ctx context.Context, g int, mandate, agent string, in agentInput) {
	a, err := l.at(g, 0).call(ctx, l.acc.human, mandate, agent, in, "")
	l.d.count("calls made", 1)
	if err != nil {
		l.lost(ctx)
		return
	}
	l.took(a)
}

// lost notes an answer lost (the gateway was killed) and waits a moment.
func (l *crashLoad) lost(ctx context.Context) {
	l.d.count("requests cut or refused by a kill (no answer)", 1)
	select {
	case <-time.After(30 * time.Millisecond):
	case <-ctx.Done():
	}
}

// took records an answer.
func (l *crashLoad) took(a *answer) {
	switch {
	case a.Status == http.StatusOK && a.Receipt != nil:
		if a.Replayed {
			return
		}
		l.d.count("calls answered 200", 1)
		l.mu.Lock()
		l.answered[a.Receipt.ID] = a.Receipt.Cost.Total
		l.recent = append(l.recent, a.Receipt.ID)
		l.mu.Unlock()
		if l.onPaid != nil {
			l.onPaid(a.Receipt)
		}
	case a.code() == "store_unavailable":
		l.d.count("calls answered 503 store_unavailable (PostgreSQL down)", 1)
	case a.Status == http.StatusServiceUnavailable || a.code() == "gateway_restarted":
		l.d.count("calls refused while starting or stopping", 1)
	case a.Replayed:
		l.d.count(fmt.Sprintf("replays of a call that ended %d %s", a.Status, a.code()), 1)
	default:
		l.d.count(fmt.Sprintf("calls answered %d %s", a.Status, a.code()), 1)
		if a.Status == http.StatusInternalServerError && l.internal.Add(1) <= 3 {
			l.d.note("a call answered 500: %s", tail(string(a.Body), 400))
		}
	}
}

// idempotent sends a call with an Idempotency-Key to gateway g and, while
// answers are lost (or the store is unreachable), sends it again with the
// same key, to the next gateway each time, until it is answered: a replay
// of its one receipt, 409 idempotency_interrupted, or (when the first
// attempt never reached a gateway) its one run.
func (l *crashLoad) idempotent(ctx context.Context, g int, agent string, in agentInput) {
	key := "drill-" + in.N
	l.mu.Lock()
	l.idem[key] = in.N
	l.mu.Unlock()
	for attempt := 0; ctx.Err() == nil && attempt < 200; attempt++ {
		a, err := l.at(g, attempt).call(context.WithoutCancel(ctx), l.acc.human, "crasher/main", agent, in, key)
		l.d.count("idempotent sends (first and retries)", 1)
		if err != nil {
			l.lost(ctx)
			continue
		}
		switch {
		case a.code() == "store_unavailable":
			l.took(a)
			time.Sleep(100 * time.Millisecond)
			continue
		case a.Status == http.StatusConflict && a.code() == "idempotency_in_flight":
			time.Sleep(50 * time.Millisecond)
			continue
		case a.Status == http.StatusConflict && a.code() == "idempotency_interrupted":
			l.d.count("idempotent retries answered 409 idempotency_interrupted", 1)
			return
		case a.Replayed:
			l.d.count("idempotent retries answered with a replay", 1)
			ran := l.agents.ranAs(in.N)
			// The receipt it ran under, or, if it never ran (refused), an
			// unbilled one.
			ok := a.Receipt != nil && (a.Receipt.ID == ran || ran == "" && !a.Receipt.Billed)
			l.d.check("a replay answers the key's one receipt", ok, "%s replayed %+v, ran as %q", key, a.Receipt, ran)
			if attempt > 0 {
				l.d.count("idempotent replays after a kill", 1)
			}
		}
		l.took(a)
		if a.Status == http.StatusOK && !a.Replayed && l.seq.Load()%3 == 0 {
			// A client that thinks its answer was lost sends it again.
			b, err := l.at(g, attempt+1).call(context.WithoutCancel(ctx), l.acc.human, "crasher/main", agent, in, key)
			l.d.count("idempotent calls re-sent after their 200", 1)
			if len(l.apis) > 1 {
				l.d.count("idempotent calls re-sent to another gateway after their 200", 1)
			}
			if err == nil && b.Status != http.StatusServiceUnavailable {
				ok := b.Replayed && b.Receipt != nil && b.Receipt.ID == a.Receipt.ID ||
					b.Status == http.StatusConflict && b.code() == "idempotency_interrupted"
				l.d.check("a re-sent key replays its one receipt", ok, "%s answered %s, re-sent: %d %.200s", key, a.Receipt.ID, b.Status, b.Body)
			}
		}
		return
	}
}

// approved makes a call above the mandate's approval threshold on gateway
// g and approves it with the human key, on the next gateway.
func (l *crashLoad) approved(ctx context.Context, g int) {
	a, err := l.at(g, 0).call(ctx, l.acc.human, "crasher/main", "drill/pricey", agentInput{N: l.nonce("pricey")}, "")
	l.d.count("calls made", 1)
	if err != nil {
		l.lost(ctx)
		return
	}
	if a.Status != http.StatusAccepted || a.Approval == nil {
		l.took(a)
		return
	}
	l.d.count("approvals asked", 1)
	for attempt := range 50 {
		b, err := l.at(g, attempt+1).do(context.WithoutCancel(ctx), "POST", "/v0/approvals/"+a.Approval.ID, l.acc.human, "{}")
		if err != nil {
			l.lost(ctx)
			if ctx.Err() != nil {
				return
			}
			continue
		}
		l.d.count("approvals decided", 1)
		if len(l.apis) > 1 {
			l.d.count("approvals decided on another gateway", 1)
		}
		l.took(b)
		return
	}
}

// checkAPI checks, right after a restart, over the API of c: each
// mandate's budget holds, and the receipts answered 200 since the last
// restart are there, succeeded and billed.
func (l *crashLoad) checkAPI(ctx context.Context, c *api, totals map[string]journal.Amount) error {
	for m, total := range totals {
		st, err := c.mandateState(ctx, l.acc.human, m)
		if err != nil {
			return fmt.Errorf("after a restart: %w", err)
		}
		spent, err1 := journal.ParseAmount(st.Spent)
		reserved, err2 := journal.ParseAmount(st.Reserved)
		l.d.check("no mandate spent more than its budget (API)", errors.Join(err1, err2) == nil && spent+reserved <= total,
			"%s spent %s reserved %s of %s", m, st.Spent, st.Reserved, total)
	}
	l.mu.Lock()
	recent := l.recent
	l.recent = nil
	l.mu.Unlock()
	if len(recent) > 20 {
		recent = recent[len(recent)-20:]
	}
	for _, id := range recent {
		a, err := c.do(ctx, "GET", "/v0/receipts/"+id, l.acc.human, nil)
		if err != nil {
			return fmt.Errorf("after a restart: GET /v0/receipts/%s: %w", id, err)
		}
		r := a.Receipt
		ok := a.Status == http.StatusOK && r != nil && r.ID == id && r.Status == "succeeded" && r.Billed == (r.Cost.Total != "0.00")
		l.d.check("a call answered 200 keeps its billed receipt across a kill (API)", ok, "%s: %d %.300s", id, a.Status, a.Body)
	}
	return nil
}

// checkAnswers holds every answer given against the stopped store and the
// agents' own count of what they executed.
func (l *crashLoad) checkAnswers(v *storeView, agents *agentServer) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for id, cost := range l.answered {
		r := v.receipts[id]
		ok := r != nil && r.Status == "succeeded" && r.Billed && r.Cost.Total.String() == cost && v.settles[id] == 1
		l.d.check("every call answered 200 has its billed receipt and one settle: entry", ok, "%s (answered cost %s): %+v settles %d", id, cost, r, v.settles[id])
	}
	byCall, byNonce, runs := agents.counts()
	l.d.count("agent executions", runs)
	for id, n := range byCall {
		l.d.check("an agent runs once per receipt", n == 1, "%s ran %d times", id, n)
	}
	for id, r := range v.receipts {
		if r.Billed && r.Agent != nil && !l.isLocal(*r.Agent) {
			l.d.check("every billed receipt's agent ran it", byCall[id] == 1, "%s billed, ran %d times", id, byCall[id])
		}
	}
	for key, n := range l.idem {
		l.d.check("an Idempotency-Key never runs a second time", byNonce[n] <= 1, "%s ran %d times", key, byNonce[n])
	}
	l.d.count("receipts in the store", int64(len(v.receipts)))
	l.d.count("journal entries in the store", int64(v.entries))
}

// isLocal reports whether ref is a version of the local agent.
func (l *crashLoad) isLocal(ref string) bool {
	return l.local != "" && strings.HasPrefix(ref, l.local+"@")
}

// spend makes calls on a small balance (the account's signup credit) at a
// random gateway each, until ctx ends: the balance runs out under
// contention across gateways, and calls are then refused
// insufficient_funds.
func (l *crashLoad) spend(ctx context.Context, acc *account, rng *rand.Rand) {
	for ctx.Err() == nil {
		agent, in := "drill/echo", agentInput{N: l.nonce("spend")}
		switch {
		case l.local != "" && rng.IntN(2) == 0:
			agent, in = l.local, agentInput{Name: "acme corp"}
		case rng.IntN(4) == 0:
			agent = "drill/pricey"
		}
		a, err := l.at(rng.IntN(len(l.apis)), 0).call(ctx, acc.human, acc.handle+"/all", agent, in, "")
		l.d.count("spender calls made", 1)
		if err != nil {
			l.lost(ctx)
			continue
		}
		switch {
		case a.code() == "insufficient_funds":
			l.d.count("spender calls refused insufficient_funds", 1)
			time.Sleep(20 * time.Millisecond)
		case a.Status == http.StatusOK && a.Receipt != nil:
			// Checked at the end (not by checkAPI: the receipt is not
			// the first account's).
			l.d.count("calls answered 200", 1)
			if agent == l.local {
				l.d.count("spender calls to an agent inside the gateway answered 200", 1)
			}
			l.mu.Lock()
			l.answered[a.Receipt.ID] = a.Receipt.Cost.Total
			l.mu.Unlock()
		default:
			l.took(a)
			time.Sleep(20 * time.Millisecond)
		}
	}
}
