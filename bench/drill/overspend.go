package drill

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"holon.dev/holon/journal"
)

// overspendDrill aims thousands of concurrent calls, parallel retries of
// one Idempotency-Key and parallel delegated runs at two mandates (2.00 and 4.00)
// of one account holding 5.00, so that both the budgets and the balance run
// out under contention, while refunds (refunds.go) give budget and balance
// back to be spent again. A watcher samples the budgets and the balances
// (the payer's and the refunding author's) over the API throughout: spent +
// reserved never above a total, the available balance never below zero.
// At the end the store must agree: what the mandates spent is what their
// receipts billed less their refunds, the balance is the credit less what
// was billed plus what was refunded, the refunds hold (checkRefunds), and
// no key ran twice.
func overspendDrill(ctx context.Context, d *drill) error {
	calls := pick(d.o.Calls, d.o.Long, 2000, 10000)
	clients := pick(d.o.Clients, d.o.Long, 64, 128)
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
	c := newAPI(g.url, clients+8)
	acc, err := c.signup(ctx, "spender", g.adminKey, "") // the signup credit: 5.00
	if err != nil {
		return err
	}
	// a runs out of budget, b of the balance left once a has spent.
	mandates := []string{"spender/a", "spender/b"}
	refunds, err := d.withRefunds(ctx, g, c, agents, registry, acc, mandates)
	if err != nil {
		return err
	}
	totals := map[string]journal.Amount{"spender/a": journal.MustParseAmount("2.00"), "spender/b": journal.MustParseAmount("4.00")}
	for _, m := range mandates {
		if err := c.mandate(ctx, acc, strings.TrimPrefix(m, "spender/"), totals[m].String(), "1.00", ""); err != nil {
			return err
		}
	}

	watchCtx, stopWatch := context.WithCancel(ctx)
	var watched sync.WaitGroup
	watched.Add(2)
	go func() {
		defer watched.Done()
		d.watch(watchCtx, c, acc, totals)
	}()
	go func() {
		defer watched.Done()
		d.watchAccount(watchCtx, c, refunds.maker)
	}()
	// Refunds all along: they give budget and balance back, which the
	// calls then spend again.
	refundCtx, stopRefunds := context.WithCancel(ctx)
	var refunding sync.WaitGroup
	refunds.start(refundCtx, &refunding, max(clients/16, 2))

	var next atomic.Int64
	var wg sync.WaitGroup
	var ok200 atomic.Int64
	idemNonces := sync.Map{}
	for w := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(d.o.Seed), uint64(w)+10))
			for {
				i := next.Add(1)
				if i > int64(calls) || ctx.Err() != nil {
					return
				}
				m := mandates[rng.IntN(len(mandates))]
				n := fmt.Sprintf("os-%d", i)
				var a *answer
				var err error
				switch p := rng.IntN(10); {
				case p < 2:
					a, err = c.call(ctx, acc.human, m, "drill/orch", agentInput{N: n}, "")
					d.count("delegated runs sent", 1)
				case p < 4:
					// The same key sent three times at once: one run at most.
					idemNonces.Store(n, true)
					var inner sync.WaitGroup
					answers := make([]*answer, 3)
					for k := range answers {
						inner.Add(1)
						go func() {
							defer inner.Done()
							answers[k], _ = c.call(ctx, acc.human, m, "drill/echo", agentInput{N: n}, "os-key-"+n)
						}()
					}
					inner.Wait()
					d.count("idempotent calls sent three times at once", 1)
					a = answers[0]
				case p < 5:
					a, err = c.call(ctx, acc.human, m, "drill/slow", agentInput{N: n, MS: rng.IntN(200)}, "")
				default:
					a, err = c.call(ctx, acc.human, m, "drill/echo", agentInput{N: n}, "")
				}
				d.count("calls made", 1)
				if err != nil || a == nil {
					d.count("calls with no answer", 1)
					continue
				}
				if a.Status == http.StatusOK {
					ok200.Add(1)
					refunds.offer(a.Receipt)
				}
				d.count(fmt.Sprintf("answered %d %s", a.Status, a.code()), 1)
			}
		}()
	}
	wg.Wait()
	stopRefunds()
	refunding.Wait()
	stopWatch()
	watched.Wait()
	if err := g.stop(); err != nil {
		return err
	}
	v, err := d.checkStore(ctx, db, totals)
	if err != nil {
		return err
	}
	billed := map[string]journal.Amount{}
	var sum journal.Amount
	for _, r := range v.receipts {
		if r.Billed && r.Parent == nil {
			billed[r.Mandate] += r.Cost.Total
			sum += r.Cost.Total
		}
	}
	// Each mandate's spent is what its receipts billed less their
	// refunds, and the balance is the credit less what was billed plus
	// what was refunded.
	d.checkRefundedMoney(v, "spender", totals)
	refunds.checkAnswered(v)
	d.check("the credit is the signup's 5.00", v.credits["spender"] == journal.MustParseAmount("5.00"), "spender was credited %s", v.credits["spender"])
	_, byNonce, _ := agents.counts()
	idemNonces.Range(func(k, _ any) bool {
		d.check("an Idempotency-Key sent at once three times runs once at most", byNonce[k.(string)] <= 1, "%s ran %d times", k, byNonce[k.(string)])
		return true
	})
	d.count("calls answered 200", ok200.Load())
	d.floor("calls answered 200", 100)
	d.floor("refunds answered 201", 10)
	d.floor("refunds answered 201 by the author", 1)
	bal := v.accounts["spender"]
	d.note("billed %s on the balance's 5.00 (mandate a %s of 2.00, b %s of 4.00; spent at the end %s and %s, after refunds), %d calls answered 200, the balance ends at %s",
		sum, billed[mandates[0]], billed[mandates[1]], v.budgets[mandates[0]].Spent, v.budgets[mandates[1]].Spent, ok200.Load(), bal.Balance)
	return nil
}

// watch samples the mandates' budgets and the account's balance until ctx
// is done.
func (d *drill) watch(ctx context.Context, c *api, acc *account, totals map[string]journal.Amount) {
	for ctx.Err() == nil {
		for m, total := range totals {
			st, err := c.mandateState(ctx, acc.human, m)
			if err != nil {
				continue
			}
			spent, err1 := journal.ParseAmount(st.Spent)
			reserved, err2 := journal.ParseAmount(st.Reserved)
			d.check("the watcher never sees spent + reserved above a mandate's total", err1 == nil && err2 == nil && spent+reserved <= total,
				"%s spent %s reserved %s of %s", m, st.Spent, st.Reserved, total)
			d.count("watcher samples of a budget", 1)
		}
		d.sampleBalance(ctx, c, acc, "the watcher never sees an available balance below zero", "watcher samples of the balance")
		select {
		case <-ctx.Done():
		case <-time.After(2 * time.Millisecond):
		}
	}
}

// sampleBalance reads acc's balance once over the API and checks the
// invariant named: neither its balance nor its available balance below
// zero.
func (d *drill) sampleBalance(ctx context.Context, c *api, acc *account, invariant, samples string) {
	a, err := c.do(ctx, "GET", "/v0/accounts", acc.human, nil)
	if err != nil || a.Status != http.StatusOK {
		return
	}
	var out struct {
		Accounts []struct {
			Account, Balance, Held, Available string
		} `json:"accounts"`
	}
	if json.Unmarshal(a.Body, &out) == nil {
		for _, ac := range out.Accounts {
			d.check(invariant, !strings.HasPrefix(ac.Available, "-") && !strings.HasPrefix(ac.Balance, "-"),
				"%s balance %s held %s available %s", ac.Account, ac.Balance, ac.Held, ac.Available)
			d.count(samples, 1)
		}
	}
}
