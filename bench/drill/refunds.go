package drill

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"time"

	"holon.dev/holon"
	"holon.dev/holon/journal"
)

// Refunds in the drills' load. The crash and overspend drills give money
// back while their calls run: receipts the load was answered 200 for, and
// calls to maker/fork (a fork of drill/base paying it royalties, so that
// a refund reverses a fee, a creator share and a royalty) are refunded in
// full or in part, by maker (the agent's author, with its human key) or
// by the operator (the admin key); sometimes twice at once for the rest,
// sometimes by an author who is not the agent's, sometimes for more than
// is left. At the end the store must agree: the journal sums to zero,
// every refund has its entry and every refund: entry its refund, no
// receipt is refunded above its cost.own nor any account for more than
// the call paid it, the mandates' spent and the payer's balance are their
// receipts' less their refunds, and every refund answered 201 is there.

// maker is the account that authors maker/fork. The registry reserves its
// namespaces from signups, so maker signs up before its agents are
// listed, and the gateway restarts with them.
const maker = "maker"

// makerAgents writes drill/base (0.05, royalties of 15 % from its forks)
// and maker/fork (0.07, a fork of it) into the registry dir, served by the
// agent server's echo.
func (a *agentServer) makerAgents(dir string) error {
	a.handlers["base"] = a.echo
	a.handlers["maker-fork"] = a.echo
	const input = "{type: object, additionalProperties: false, properties: {n: {type: string, maxLength: 200}, ms: {type: integer, minimum: 0, maximum: 60000}}}"
	for _, m := range []struct{ dir, id, price, extra string }{
		{"base", "drill/base", "0.05", "royalties: {forks: \"0.15\"}\n"},
		{"maker-fork", "maker/fork", "0.07", "lineage: {fork_of: drill/base@1.0.0}\n"},
	} {
		doc := fmt.Sprintf(`id: %s
version: 1.0.0
summary: A webhook agent of the drills, on loopback, for refunds.
license: proprietary
interface:
  input: %s
  output: {type: object}
pricing: {model: per_run, amount: %q, currency: EUR}
runtime: {kind: webhook, endpoint: %q, limits: {timeout_s: 10}}
%s`, m.id, input, m.price, a.url+"/"+m.dir, m.extra)
		if err := writeManifest(dir, m.dir, doc); err != nil {
			return err
		}
	}
	return nil
}

// refunder gives money back while a drill's load runs.
type refunder struct {
	d        *drill
	c        *api
	payer    *account
	mandates []string
	maker    *account
	adminKey string

	mu sync.Mutex
	// pool are receipts answered 200 that may be refunded (the newest
	// few hundred).
	pool []*receipt
	// left is what the refunds answered 201 left of each receipt's
	// cost.own, as this client knows it.
	left map[string]journal.Amount
	// given are the refunds answered 201, by refund id.
	given map[string]givenRefund
}

type givenRefund struct {
	receipt string
	amount  journal.Amount
}

// withRefunds signs up maker, lists its agents in the registry and
// restarts the gateway on the same store, then returns a refunder whose
// calls the payer makes under mandates.
func (d *drill) withRefunds(ctx context.Context, g *gatewayProc, c *api, agents *agentServer, registry string, payer *account, mandates []string) (*refunder, error) {
	mk, err := c.signup(ctx, maker, g.adminKey, "")
	if err != nil {
		return nil, err
	}
	if err := agents.makerAgents(registry); err != nil {
		return nil, err
	}
	if err := g.stop(); err != nil {
		return nil, err
	}
	if err := g.start(ctx); err != nil {
		return nil, fmt.Errorf("restart with maker's agents listed: %w", err)
	}
	return &refunder{d: d, c: c, payer: payer, mandates: mandates, maker: mk, adminKey: g.adminKey,
		left: map[string]journal.Amount{}, given: map[string]givenRefund{}}, nil
}

// offer adds a receipt answered 200 to those the refunder may refund.
func (rf *refunder) offer(r *receipt) {
	if r == nil || !r.Billed || r.Cost.Own == "" || r.Cost.Own == "0.00" {
		return
	}
	rf.mu.Lock()
	defer rf.mu.Unlock()
	rf.pool = append(rf.pool, r)
	if len(rf.pool) > 400 {
		rf.pool = rf.pool[len(rf.pool)-300:]
	}
}

// take removes a receipt from the pool at random (nil when it is empty).
func (rf *refunder) take(rng *rand.Rand) *receipt {
	rf.mu.Lock()
	defer rf.mu.Unlock()
	if len(rf.pool) == 0 {
		return nil
	}
	i := rng.IntN(len(rf.pool))
	if rng.IntN(2) == 0 {
		// maker's calls are fewer: half the time, the newest of them.
		for j := len(rf.pool) - 1; j >= 0; j-- {
			if a := rf.pool[j].Agent; a != nil && strings.HasPrefix(*a, maker+"/") {
				i = j
				break
			}
		}
	}
	r := rf.pool[i]
	rf.pool[i] = rf.pool[len(rf.pool)-1]
	rf.pool = rf.pool[:len(rf.pool)-1]
	return r
}

// start starts n refunding workers (wg counts them) until ctx ends.
func (rf *refunder) start(ctx context.Context, wg *sync.WaitGroup, n int) {
	for w := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(rf.d.o.Seed), uint64(w)+1000))
			for ctx.Err() == nil {
				rf.step(ctx, rng)
			}
		}()
	}
}

// step makes one call to maker/fork, or refunds one receipt of the pool.
func (rf *refunder) step(ctx context.Context, rng *rand.Rand) {
	if rng.IntN(3) == 0 {
		m := rf.mandates[rng.IntN(len(rf.mandates))]
		a, err := rf.c.call(ctx, rf.payer.human, m, "maker/fork", agentInput{N: fmt.Sprintf("fork-%d", rng.Int64())}, "")
		rf.d.count("calls to maker/fork made", 1)
		if err != nil {
			rf.pause(ctx)
			return
		}
		if a.Status == http.StatusOK && a.Receipt != nil {
			rf.d.count("calls to maker/fork answered 200", 1)
			rf.offer(a.Receipt)
		} else {
			rf.d.count(fmt.Sprintf("calls to maker/fork answered %d %s", a.Status, a.code()), 1)
			rf.pause(ctx)
		}
		return
	}
	r := rf.take(rng)
	if r == nil {
		rf.pause(ctx)
		return
	}
	// A delegated child of the call, now and then, rather than the call.
	if len(r.Children) > 0 && rng.IntN(2) == 0 {
		id := r.Children[rng.IntN(len(r.Children))]
		rf.refund(ctx, &receipt{ID: id, Billed: true}, rf.adminKey, nil, "child")
		return
	}
	own, err := journal.ParseAmount(r.Cost.Own)
	if err != nil {
		rf.d.check("a receipt answered 200 has a cost.own", false, "%s: %q", r.ID, r.Cost.Own)
		return
	}
	rf.mu.Lock()
	left, seen := rf.left[r.ID]
	if !seen {
		left = own
	}
	rf.mu.Unlock()
	byMaker := r.Agent != nil && strings.HasPrefix(*r.Agent, maker+"/")
	key := rf.adminKey
	if byMaker && rng.IntN(3) > 0 {
		key = rf.maker.human
	}
	switch p := rng.IntN(100); {
	case p < 5 && !byMaker:
		// An author refunding a receipt of another author's agent: as
		// if there were no such receipt.
		a, err := rf.c.do(ctx, "POST", "/v0/receipts/"+r.ID+"/refunds", rf.maker.human, map[string]any{"reason": "not mine"})
		if err == nil {
			rf.d.check("an author refunding another author's receipt is answered 404 not_found", a.Status == http.StatusNotFound && a.code() == holon.CodeNotFound,
				"%s: %d %.300s", r.ID, a.Status, a.Body)
			rf.d.count("refunds by an author of another's receipt (404)", 1)
		}
		rf.offer(r)
	case p < 10 && left > 0:
		// More than is left.
		over := left + journal.Amount(1+rng.Int64N(1000))
		a, err := rf.c.do(ctx, "POST", "/v0/receipts/"+r.ID+"/refunds", key, map[string]any{"amount": over.String(), "reason": "too much"})
		if err == nil {
			rf.d.check("a refund of more than is left is answered 409 refund_exceeds_receipt", a.Status == http.StatusConflict && a.code() == holon.CodeRefundTooLarge,
				"%s: %s of %s left: %d %.300s", r.ID, over, left, a.Status, a.Body)
			rf.d.count("refunds of more than is left (409)", 1)
		}
		rf.offer(r)
	case p < 20:
		// The rest, twice at once: one gives it back, the other finds
		// nothing left.
		var wg sync.WaitGroup
		answers := make([]*refundAnswer, 2)
		for i := range answers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				answers[i] = rf.refund(ctx, r, key, nil, "twice")
			}()
		}
		wg.Wait()
		if answers[0] != nil && answers[1] != nil {
			created := 0
			known := true
			for _, a := range answers {
				switch {
				case a.Status == http.StatusCreated:
					created++
				case a.code() == holon.CodeRefundTooLarge, a.code() == holon.CodeInsufficientFunds, a.Status == http.StatusServiceUnavailable:
				default:
					known = false
				}
			}
			rf.d.check("two refunds of the rest at once never both give it back", created <= 1 && known,
				"%s: %d %.200s / %d %.200s", r.ID, answers[0].Status, answers[0].Body, answers[1].Status, answers[1].Body)
			if created == 1 && (answers[0].code() == holon.CodeRefundTooLarge || answers[1].code() == holon.CodeRefundTooLarge) {
				rf.d.count("refunds of the rest sent twice at once: one 201, one 409", 1)
			}
		}
	case p < 55 || left <= 1:
		rf.refund(ctx, r, key, nil, "the rest")
	default:
		part := journal.Amount(1 + rng.Int64N(int64(left-1)))
		if rf.refund(ctx, r, key, &part, "a part") != nil {
			rf.offer(r) // the rest, later
		}
	}
}

// refundAnswer is POST /v0/receipts/{id}/refunds's answer.
type refundAnswer struct {
	*answer
	Refund struct {
		ID      string `json:"id"`
		Receipt string `json:"receipt"`
		Amount  string `json:"amount"`
		By      string `json:"by"`
	} `json:"refund"`
	Refunded string `json:"refunded"`
}

// refund sends one refund (amount nil: the rest) and records its answer;
// nil when the answer was lost.
func (rf *refunder) refund(ctx context.Context, r *receipt, key string, amount *journal.Amount, what string) *refundAnswer {
	body := map[string]any{"reason": "drill: " + what}
	if amount != nil {
		body["amount"] = amount.String()
	}
	// Not cut when the load stops: its answer is kept.
	a, err := rf.c.do(context.WithoutCancel(ctx), "POST", "/v0/receipts/"+r.ID+"/refunds", key, body)
	by := "operator"
	if key != rf.adminKey {
		by = "author"
	}
	rf.d.count("refunds sent", 1)
	if err != nil {
		rf.d.count("refunds with no answer (cut by a kill)", 1)
		rf.pause(ctx)
		return nil
	}
	ra := &refundAnswer{answer: a}
	_ = json.Unmarshal(a.Body, ra)
	switch {
	case a.Status == http.StatusCreated:
		amt, err := journal.ParseAmount(ra.Refund.Amount)
		refunded, err2 := journal.ParseAmount(ra.Refunded)
		ok := err == nil && err2 == nil && ra.Refund.Receipt == r.ID && (amount == nil || amt == *amount) && amt > 0
		rf.d.check("a refund answered 201 names its receipt and amount", ok, "%s: %.300s", r.ID, a.Body)
		kind := "in part"
		if amount == nil {
			kind = "in full (the rest)"
		}
		rf.d.count(fmt.Sprintf("refunds answered 201, %s, by the %s", kind, by), 1)
		if by == "author" {
			rf.d.count("refunds answered 201 by the author", 1)
		}
		rf.mu.Lock()
		rf.given[ra.Refund.ID] = givenRefund{receipt: r.ID, amount: amt}
		if own, err := journal.ParseAmount(r.Cost.Own); err == nil && r.Cost.Own != "" {
			rf.left[r.ID] = own - refunded
		}
		rf.mu.Unlock()
	case a.code() == holon.CodeRefundTooLarge:
		rf.d.count("refunds answered 409 refund_exceeds_receipt", 1)
	case a.code() == holon.CodeInsufficientFunds:
		rf.d.count("refunds answered 403 insufficient_funds", 1)
	case a.Status == http.StatusServiceUnavailable:
		rf.d.count("refunds refused while starting or stopping", 1)
	default:
		rf.d.count(fmt.Sprintf("refunds answered %d %s", a.Status, a.code()), 1)
		if a.Status == http.StatusInternalServerError {
			rf.d.note("a refund answered 500: %s", tail(string(a.Body), 400))
		}
	}
	return ra
}

func (rf *refunder) pause(ctx context.Context) {
	select {
	case <-time.After(20 * time.Millisecond):
	case <-ctx.Done():
	}
}

// checkAnswered checks that every refund answered 201 is in the store, as
// answered.
func (rf *refunder) checkAnswered(v *storeView) {
	rf.mu.Lock()
	defer rf.mu.Unlock()
	stored := map[string]*holon.Refund{}
	for _, rs := range v.refunds {
		for _, r := range rs {
			stored[r.ID] = r
		}
	}
	for id := range stored {
		if _, ok := rf.given[id]; !ok {
			rf.d.count("refunds in the store whose answer was lost", 1)
		}
	}
	for id, g := range rf.given {
		s := stored[id]
		rf.d.check("every refund answered 201 is in the store, as answered", s != nil && s.Receipt == g.receipt && s.Amount == g.amount,
			"%s (%s of %s): %+v", id, g.amount, g.receipt, s)
	}
	rf.d.count("refunds answered 201", int64(len(rf.given)))
}

// watchAccount samples an account's balance until ctx is done: its
// available balance never below zero, refunds taken from it included.
func (d *drill) watchAccount(ctx context.Context, c *api, acc *account) {
	for ctx.Err() == nil {
		d.sampleBalance(ctx, c, acc, "the watcher never sees an author's available balance below zero", "watcher samples of the author's balance")
		select {
		case <-ctx.Done():
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// readRefunds reads the refunds bucket into the view.
func (v *storeView) readRefunds(tx holon.DocsTx) error {
	return tx.ForEach(holon.BucketRefunds, "", func(key string, raw json.RawMessage) (bool, error) {
		r := new(holon.Refund)
		if err := json.Unmarshal(raw, r); err != nil {
			return false, fmt.Errorf("refund %s: %w", key, err)
		}
		v.refunds[r.Receipt] = append(v.refunds[r.Receipt], r)
		return true, nil
	})
}

// checkRefunds checks the store's refunds against its journal and
// receipts: the journal sums to zero, every refund has its entry and every
// refund: entry its refund, no receipt is refunded above its cost.own, and
// no account gives back more than the call paid it.
// It returns what the refunds gave back, and how many there are.
func (d *drill) checkRefunds(v *storeView) (journal.Amount, int) {
	var sum journal.Amount
	for _, a := range v.accounts {
		sum += a.Balance
	}
	d.check("the journal sums to zero (every balance added up)", sum == 0, "the balances add up to %s", sum)
	for key, lines := range v.refundEntries {
		var s journal.Amount
		for _, l := range lines {
			s += l.Amount
		}
		d.check("every refund entry sums to zero", s == 0, "%s sums to %s", key, s)
	}
	entries := 0
	var refunded journal.Amount
	for id, rs := range v.refunds {
		r := v.receipts[id]
		var all journal.Amount
		gave := map[string]journal.Amount{}
		for i, rf := range rs {
			entries++
			all += rf.Amount
			key := holon.RefundEntryKey(id, i+1)
			lines, ok := v.refundEntries[key]
			want := map[string]journal.Amount{}
			if r != nil {
				want[r.Payer] += rf.Amount
			}
			for _, p := range rf.Parts {
				want[p.To] -= p.Amount
				gave[p.To] += p.Amount
			}
			got := map[string]journal.Amount{}
			for _, l := range lines {
				got[l.Account] += l.Amount
			}
			d.check("every refund has its entry, moving what it says", ok && rf.Entry == key && rf.ID == holon.RefundKey(id, i+1) && sameAmounts(got, want),
				"%s (entry %s, found %v): moves %v, its record says %v", rf.ID, key, ok, got, want)
		}
		refunded += all
		ok := r != nil && r.Billed && all <= r.Cost.Own
		detail := "no receipt"
		if r != nil {
			detail = fmt.Sprintf("billed %v, cost.own %s, refunded %s", r.Billed, r.Cost.Own, all)
		}
		d.check("no receipt is refunded above its cost.own, nor one not billed", ok, "%s: %s", id, detail)
		if r == nil {
			continue
		}
		split := map[string]journal.Amount{}
		for _, s := range r.Splits {
			split[s.To] += s.Amount
		}
		for acct, g := range gave {
			d.check("no account gives back more than the call paid it", g <= split[acct], "%s: %s gave back %s of its %s", id, acct, g, split[acct])
		}
	}
	d.check("every refund: entry has its refund", entries == len(v.refundEntries), "%d refunds, %d refund: entries", entries, len(v.refundEntries))
	return refunded, entries
}

// checkRefundedMoney checks, on a store with nothing in flight, that the
// drill's mandates have spent what their receipts cost less their
// refunds, and that payer's balance is its credits less what it was
// billed, plus what it was refunded; and checkRefunds.
func (d *drill) checkRefundedMoney(v *storeView, payer string, totals map[string]journal.Amount) {
	refunded, n := d.checkRefunds(v)
	d.note("refunded %s in %d refunds of %d receipts", refunded, n, len(v.refunds))
	// The mandates' spent: their receipts' cost less their refunds, and
	// the payer's balance: its credits less what it was billed, plus
	// what it was refunded.
	want := map[string]journal.Amount{}
	var billed journal.Amount
	for _, r := range v.receipts {
		// A call's cost.total, as holon verify counts it: a parent cut by
		// a kill is unbilled, but its children that settled are in it.
		if r.Parent == nil {
			want[r.Mandate] += r.Cost.Total
			if r.Payer == payer {
				billed += r.Cost.Total
			}
		}
	}
	var back journal.Amount
	for id, rs := range v.refunds {
		r := v.receipts[id]
		if r == nil {
			continue
		}
		amount := holon.Refunded(rs)
		if r.Payer == payer {
			back += amount
		}
		for cur := r; cur != nil; {
			if cur.Parent == nil {
				want[cur.Mandate] -= amount
				break
			}
			p := v.receipts[*cur.Parent]
			if p == nil || p.Payer != cur.Payer {
				break
			}
			cur = p
		}
	}
	for m := range totals {
		d.check("a mandate's spent is its receipts' cost less their refunds", v.budgets[m].Spent == want[m],
			"%s spent %s, its receipts cost %s net of refunds", m, v.budgets[m].Spent, want[m])
	}
	credits := v.credits[payer]
	d.check("the payer's balance is its credits less what it was billed, plus its refunds", v.accounts[payer].Balance == credits-billed+back,
		"%s balance %s; credits %s, billed %s, refunded %s", payer, v.accounts[payer].Balance, credits, billed, back)
}

func sameAmounts(a, b map[string]journal.Amount) bool {
	for k, x := range a {
		if x != 0 && b[k] != x {
			return false
		}
	}
	for k, x := range b {
		if x != 0 && a[k] != x {
			return false
		}
	}
	return true
}
