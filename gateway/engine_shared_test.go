package gateway_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"holon.dev/holon"
	"holon.dev/holon/backup/pgtest"
	"holon.dev/holon/gateway"
	"holon.dev/holon/gateway/contract"
	"holon.dev/holon/gateway/storetest"
	"holon.dev/holon/journal"
	"holon.dev/holon/kv/pg"
)

// sharedGateways are engines on one PostgreSQL database, each on its own
// store handle: gateways serving from one database.
type sharedGateways struct {
	engines []*gateway.Engine
	stores  []holon.Store
	// denied counts the settlements that denied their call, their
	// admission checked again (gateway.StepSettleDenied), and ran the
	// in-process agent's runs whose reservation was in no store.
	denied, inMemory atomic.Int64
}

// remoteRunner is a runner that is not in-process: its calls keep their
// durable reservation.
type remoteRunner struct{}

func (remoteRunner) Run(_ context.Context, _ *gateway.Invocation) gateway.RunResult {
	time.Sleep(time.Duration(rand.IntN(1500)) * time.Microsecond)
	return gateway.RunResult{Output: json.RawMessage(`{}`), Outcome: contract.Outcome{Kind: contract.OutcomeOutput}}
}

// openShared opens n gateways on a new database of a real PostgreSQL
// (skipped without one, failed under HOLON_TEST_STRICT=1), with the
// agents of manifests (the in-process ones run handler) and the mandates,
// whose issuer gets credit once.
func openShared(t *testing.T, n int, manifests, mandates []string, credit string, handler gateway.DevHandler) *sharedGateways {
	t.Helper()
	return openSharedWith(t, n, manifests, mandates, credit, handler, nil, nil)
}

// openSharedWith is openShared with each engine's store wrapped (nil: as
// it is) and its store failures told to onFailure (nil: a test failure).
func openSharedWith(t *testing.T, n int, manifests, mandates []string, credit string, handler gateway.DevHandler,
	wrap func(holon.Store) holon.Store, onFailure func(error)) *sharedGateways {
	t.Helper()
	if wrap == nil {
		wrap = func(s holon.Store) holon.Store { return s }
	}
	if onFailure == nil {
		onFailure = func(err error) { t.Errorf("store failure: %v", err) }
	}
	url := pgtest.Start(t).CreateDB(t, "gateways")
	sg := &sharedGateways{}
	for range n {
		s, err := pg.Open(context.Background(), url, holon.StoreOptions{})
		if err != nil {
			t.Fatalf("open the store: %v", err)
		}
		t.Cleanup(func() { s.Close() })
		reg := gateway.NewRegistry()
		var ms []*contract.Manifest
		for _, doc := range manifests {
			m, err := contract.ParseManifest([]byte(doc))
			if err != nil {
				t.Fatalf("manifest: %v\n%s", err, doc)
			}
			ms = append(ms, m)
		}
		if err := reg.AddAll(ms, contract.AgentFacts{}, true); err != nil {
			t.Fatalf("registry: %v", err)
		}
		dev := gateway.NewDevRuntime()
		dev.Register("probe", func(ctx context.Context, in json.RawMessage, c *gateway.Ctx) (any, error) {
			if !holdCommitted(s, c.Receipt()) {
				sg.inMemory.Add(1)
			}
			return handler(ctx, in, c)
		})
		eng := gateway.New(gateway.Config{Store: wrap(s), Registry: reg, SignupCredit: journal.MustParseAmount(credit), OnStoreFailure: onFailure,
			Runners: map[string]gateway.Runner{contract.RuntimeDev: dev, contract.RuntimeWebhook: remoteRunner{}},
			OnStep: func(step, _ string) {
				if step == gateway.StepSettleDenied {
					sg.denied.Add(1)
				}
			}})
		sg.engines, sg.stores = append(sg.engines, eng), append(sg.stores, s)
	}
	t.Cleanup(func() {
		for i, e := range sg.engines {
			if n := e.InFlight(); n != 0 {
				t.Errorf("gateway %d: %d reservations left in memory", i, n)
			}
		}
		storetest.CheckMoney(t, sg.stores[0])
	})
	for _, doc := range mandates {
		m, err := contract.ParseMandate([]byte(doc))
		if err != nil {
			t.Fatalf("mandate: %v\n%s", err, doc)
		}
		if err := sg.engines[0].PutMandate(context.Background(), m); err != nil {
			t.Fatalf("PutMandate %s: %v", m.ID, err)
		}
	}
	return sg
}

// call makes a call through gateway g and fails the test on an error.
func (sg *sharedGateways) call(t *testing.T, g int, mandate, agent string) *gateway.CallResult {
	t.Helper()
	res, err := sg.engines[g].Call(context.Background(), gateway.CallInput{Mandate: mandate, Agent: agent, Input: json.RawMessage(`{}`)})
	if err != nil {
		t.Fatalf("gateway %d: Call(%s %s): %v", g, mandate, agent, err)
	}
	return res
}

// watch samples the store until stop closes: no budget of limits spent
// and reserved above its total, no available balance of payer below zero;
// with one gateway, the engine's view of each mandate too (Mandate, which
// counts its reservations in memory). It returns how many samples it
// took.
func (sg *sharedGateways) watch(t *testing.T, limits map[string]journal.Amount, payer string, stop <-chan struct{}) <-chan int {
	samples := make(chan int, 1)
	go func() {
		n := 0
		defer func() { samples <- n }()
		for {
			if len(sg.engines) == 1 {
				for m, total := range limits {
					st, err := sg.engines[0].Mandate(m)
					if err != nil {
						t.Errorf("Mandate(%s): %v", m, err)
					} else if st.Spent+st.Reserved > total {
						t.Errorf("the engine shows %s spent %s + reserved %s, above the total %s", m, st.Spent, st.Reserved, total)
					}
				}
			}
			err := sg.stores[n%len(sg.stores)].View(func(tx holon.Tx) error {
				for m, total := range limits {
					b, err := tx.Budget(m)
					if err != nil {
						return err
					}
					if b.Spent+b.Reserved > total {
						t.Errorf("%s: spent %s + reserved %s is above the total %s", m, b.Spent, b.Reserved, total)
					}
				}
				a, err := tx.Account(payer)
				if err != nil {
					return err
				}
				if a.Balance < 0 || a.Available() < 0 {
					t.Errorf("%s has %s, %s available", payer, a.Balance, a.Available())
				}
				return nil
			})
			if err != nil {
				t.Errorf("watch: %v", err)
			}
			n++
			select {
			case <-stop:
				return
			default:
			}
		}
	}()
	return samples
}

var (
	pricing     = `pricing: {model: per_run, amount: "0.01", currency: EUR}`
	sharedLocal = agentDoc("acme/local", "1.0.0", "interface: {input: {}, output: {}}\n"+pricing+"\nruntime: {kind: dev, tool: probe}\n")
	sharedFar   = agentDoc("acme/far", "1.0.0", "interface: {input: {}, output: {}}\n"+pricing+"\nruntime: {kind: webhook, endpoint: \"https://agent.example/run\"}\n")
)

// load makes calls from clients goroutines spread over the gateways, rounds
// each, to acme/local mostly and acme/far every fourth, under the mandates
// in turn; every answer must be a success, or a denial that bills nothing
// and carries no output.
func (sg *sharedGateways) load(t *testing.T, clients, rounds int, mandates []string) (succeeded, denied int64) {
	var wg sync.WaitGroup
	var ok, no atomic.Int64
	for i := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range rounds {
				agent, mandate := "acme/local", mandates[(i/2+j)%len(mandates)]
				if (i+j)%4 == 3 {
					agent = "acme/far"
				}
				res := sg.call(t, i%len(sg.engines), mandate, agent)
				switch r := res.Receipt; r.Status {
				case holon.StatusSucceeded:
					ok.Add(1)
				case holon.StatusDenied:
					no.Add(1)
					if r.Billed || res.Output != nil || res.Message == "" || r.Error == nil ||
						(*r.Error != holon.CodeOverBudget && *r.Error != holon.CodeInsufficientFunds) {
						t.Errorf("denied call %s: billed %v, output %s, message %q, error %v", r.ID, r.Billed, res.Output, res.Message, r.Error)
					}
				default:
					t.Errorf("call %s: %s", r.ID, r.Status)
				}
			}
		}()
	}
	wg.Wait()
	return ok.Load(), no.Load()
}

// drain makes calls one after another under each of limits' mandates
// until none fits, and checks that the payer's balance was then spent to
// the last micro-unit, want of it under those mandates, none of them
// above its total.
func (sg *sharedGateways) drain(t *testing.T, limits map[string]journal.Amount, want journal.Amount) {
	for _, agent := range []string{"acme/local", "acme/far"} {
		for m := range limits {
			for sg.call(t, 0, m, agent).Receipt.Status == holon.StatusSucceeded {
			}
		}
	}
	err := sg.stores[0].View(func(tx holon.Tx) error {
		var all journal.Amount
		for m, total := range limits {
			b, err := tx.Budget(m)
			if err != nil {
				return err
			}
			if b.Spent > total {
				t.Errorf("%s spent %s, above its total %s", m, b.Spent, total)
			}
			all += b.Spent
		}
		a, err := tx.Account("alice")
		if err != nil {
			return err
		}
		if all != want || a.Balance != 0 {
			t.Errorf("%s spent under %d mandates, alice has %s left; want %s spent, nothing left", all, len(limits), a.Balance, want)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// tightMandates are n mandates of alice with small budgets (0.05 each),
// and alice/wide, with their totals, in the order load takes them.
func tightMandates(n int) (docs, ids []string, limits map[string]journal.Amount) {
	limits = map[string]journal.Amount{"alice/wide": journal.MustParseAmount("10.00")}
	docs, ids = []string{mandateWith("wide", `budget: {total: "10.00"}`)}, []string{"alice/wide"}
	for i := range n {
		name := fmt.Sprintf("t%d", i)
		docs = append(docs, mandateWith(name, `budget: {total: "0.05"}`))
		ids = append(ids, "alice/"+name)
		limits["alice/"+name] = journal.MustParseAmount("0.05")
	}
	return docs, ids, limits
}

// Ensure that gateways sharing a PostgreSQL store, each keeping its
// in-process calls' reservations in memory, overspend nothing: a call
// another gateway's spending overtook is denied at its settlement, as its
// admission would have denied it (over_budget, nothing billed, its
// agent's output dropped). First one such call on purpose: gateway 0's
// call runs while gateway 1 spends what is left; then three gateways
// make concurrent calls on one budget (0.50) and one balance (1.00) that
// admit only some of them, to in-process and remote agents, while a
// watcher samples the store: budgets never above their totals, the
// balance never below zero; at the end the calls made one after another
// spend the balance to the last micro-unit, and the store's money checks
// (one settle entry per billed receipt, none for the others, no hold
// left, the journal summing to zero, budgets matching the receipts).
func TestEngine_SharedStore_SettlementRechecksAdmission(t *testing.T) {
	release := make(chan struct{})
	blocked := make(chan struct{})
	var blocking atomic.Bool
	docs, ids, limits := tightMandates(8)
	sg := openShared(t, 3, []string{sharedLocal, sharedFar}, append(docs, mandateWith("big", `budget: {total: "0.60"}`)),
		"1.00", func(_ context.Context, in json.RawMessage, _ *gateway.Ctx) (any, error) {
			if blocking.CompareAndSwap(true, false) {
				close(blocked)
				<-release
			}
			time.Sleep(time.Duration(rand.IntN(2000)) * time.Microsecond)
			return map[string]any{}, nil
		})

	// On purpose: gateway 0 admits a call under alice/big (0.60) in
	// memory and runs it; meanwhile gateway 1 spends 0.60 under it.
	blocking.Store(true)
	first := make(chan *gateway.CallResult)
	go func() { first <- sg.call(t, 0, "alice/big", "acme/local") }()
	<-blocked
	spent := 0
	for sg.call(t, 1, "alice/big", "acme/local").Receipt.Status == holon.StatusSucceeded {
		spent++
	}
	if spent != 60 {
		t.Errorf("gateway 1 made %d calls under alice/big, want 60: it sees nothing of gateway 0's reservation", spent)
	}
	overBudget := sg.call(t, 2, "alice/big", "acme/far") // the durable path's denial
	close(release)
	res := <-first
	if r := res.Receipt; r.Status != holon.StatusDenied || r.Error == nil || *r.Error != holon.CodeOverBudget || r.Billed || res.Output != nil {
		t.Errorf("the overtaken call: %s %v billed %v output %s; want denied over_budget, nothing billed, no output", r.Status, r.Error, r.Billed, res.Output)
	}
	if want := overBudget.Message; res.Message != want {
		t.Errorf("the overtaken call's answer %q, want admission's %q", res.Message, want)
	}
	if n := sg.denied.Load(); n != 1 {
		t.Errorf("%d settlements denied their call, want 1", n)
	}
	var stored *holon.Receipt
	if err := sg.stores[2].View(func(tx holon.Tx) (err error) { stored, err = tx.Receipt(res.Receipt.ID); return err }); err != nil {
		t.Fatal(err)
	}
	if stored.Status != holon.StatusDenied || stored.Billed || stored.WorstCase == nil || *stored.WorstCase != journal.MustParseAmount("0.01") {
		t.Errorf("stored receipt %+v; want denied, not billed, its worst case kept as the durable path keeps it", stored)
	}

	// Concurrent: three gateways, 0.40 of the balance left.
	stop := make(chan struct{})
	watched := maps.Clone(limits)
	watched["alice/big"] = journal.MustParseAmount("0.60")
	samples := sg.watch(t, watched, "alice", stop)
	before := sg.denied.Load()
	ok, no := sg.load(t, 48, 4, ids)
	close(stop)
	if n := <-samples; n < 10 {
		t.Errorf("the watcher sampled %d times, want many", n)
	}
	sg.drain(t, limits, journal.MustParseAmount("0.40"))
	t.Logf("concurrent: %d succeeded, %d denied, %d of them at settlement; %d runs on reservations in memory", ok, no, sg.denied.Load()-before, sg.inMemory.Load())
	if sg.inMemory.Load() == 0 {
		t.Error("no call ran on a reservation held in memory")
	}
}

// Ensure that one gateway alone on a PostgreSQL store, its in-process
// calls' reservations in memory, never has a settlement deny its call:
// its admissions counted every reservation of the process that the store
// did not show. Concurrent calls on a budget and a balance that admit
// only some of them, to in-process and remote agents; the calls that did
// not fit are denied at admission.
func TestEngine_SharedStore_OneGatewayNeverDeniesAtSettlement(t *testing.T) {
	docs, ids, limits := tightMandates(16)
	sg := openShared(t, 1, []string{sharedLocal, sharedFar}, docs, "1.00", func(context.Context, json.RawMessage, *gateway.Ctx) (any, error) {
		time.Sleep(time.Duration(rand.IntN(2000)) * time.Microsecond)
		return map[string]any{}, nil
	})
	stop := make(chan struct{})
	samples := sg.watch(t, limits, "alice", stop)
	ok, no := sg.load(t, 64, 8, ids)
	close(stop)
	<-samples
	sg.drain(t, limits, journal.MustParseAmount("1.00"))
	if n := sg.denied.Load(); n != 0 {
		t.Errorf("%d settlements denied their call on one gateway, want none", n)
	}
	if no == 0 || ok == 0 {
		t.Errorf("%d calls succeeded, %d denied: want both", ok, no)
	}
	if sg.inMemory.Load() == 0 {
		t.Error("no call ran on a reservation held in memory")
	}
	t.Logf("%d succeeded, %d denied at admission; %d runs on reservations in memory", ok, no, sg.inMemory.Load())
}

// Ensure that a mandate revoked through one gateway is refused by the next
// call on another, even when that gateway's admission read the committed
// state its store keeps in memory (holon.RecentViews), which does not show
// the revocation yet: the settlement reads the mandate again, denies the
// call mandate_inactive and bills nothing. Each round warms gateway 1 with
// calls under a new mandate, first to a remote agent (its durable
// reservation reads the mandate in the writer's transaction, so the
// writer keeps it whatever the settlement reads), then to the in-process
// one; it revokes the mandate through gateway 0 and calls under it on
// gateway 1 at once, the in-process agent or the remote one (whose durable
// reservation reads the mandate again and denies it). Some calls of each
// kind must have been admitted from memory, else the test would not test
// those checks.
func TestEngine_SharedStore_RevokedElsewhereRefusedAtOnce(t *testing.T) {
	const rounds = 20
	var docs []string
	for i := range rounds {
		docs = append(docs, mandateWith(fmt.Sprintf("r%d", i), `budget: {total: "0.50"}`))
	}
	sg := openShared(t, 2, []string{sharedLocal, sharedFar}, docs, "1.00", func(context.Context, json.RawMessage, *gateway.Ctx) (any, error) {
		return map[string]any{}, nil
	})
	rv := sg.stores[1].(*pg.Store)
	var fromMemory [2]int
	for i, doc := range docs {
		id := fmt.Sprintf("alice/r%d", i)
		for _, agent := range []string{"acme/far", "acme/local"} {
			if r := sg.call(t, 1, id, agent).Receipt; r.Status != holon.StatusSucceeded {
				t.Fatalf("warming call to %s under %s: %s", agent, id, r.Status)
			}
		}
		m, err := contract.ParseMandate([]byte(doc))
		if err != nil {
			t.Fatal(err)
		}
		m.Revoked = true
		if err := sg.engines[0].PutMandate(context.Background(), m); err != nil {
			t.Fatal(err)
		}
		// Even rounds call the in-process agent (denied by the settlement's
		// check), odd ones the remote agent (denied by its durable
		// reservation, which reads the mandate again too).
		agent := []string{"acme/local", "acme/far"}[i%2]
		served := rv.Reads().Recent
		res := sg.call(t, 1, id, agent)
		if rv.Reads().Recent > served {
			fromMemory[i%2]++
		}
		if r := res.Receipt; r.Status != holon.StatusDenied || r.Error == nil || *r.Error != holon.CodeMandateInactive || r.Billed || res.Output != nil {
			t.Errorf("a call to %s under %s on gateway 1 after gateway 0 revoked it: %s %v billed %v output %s; want denied mandate_inactive, nothing billed, no output",
				agent, id, r.Status, r.Error, r.Billed, res.Output)
		}
	}
	if fromMemory[0] == 0 || fromMemory[1] == 0 {
		t.Errorf("calls admitted on the state kept in memory: %d of %d in-process, %d of %d remote; want some of each", fromMemory[0], rounds/2, fromMemory[1], rounds/2)
	}
	t.Logf("admitted on the state kept in memory: %d of %d in-process calls, %d of %d remote; denied at settlement: %d", fromMemory[0], rounds/2, fromMemory[1], rounds/2, sg.denied.Load())
}

// Ensure that on a store several gateways share, a call with an
// Idempotency-Key keeps its durable reservation: a claim in memory would
// let two gateways run the same key.
func TestEngine_SharedStore_KeyedCallsReserveDurably(t *testing.T) {
	var sg *sharedGateways
	var stored atomic.Bool
	sg = openShared(t, 1, []string{sharedLocal}, []string{mandateWith("wide", `budget: {total: "10.00"}`)}, "1.00",
		func(_ context.Context, _ json.RawMessage, c *gateway.Ctx) (any, error) {
			stored.Store(holdCommitted(sg.stores[0], c.Receipt()))
			return map[string]any{}, nil
		})
	claim := &memClaim{key: fmt.Sprintf("k%d", rand.IntN(1<<30))}
	res, err := sg.engines[0].Call(context.Background(), gateway.CallInput{Mandate: "alice/wide", Agent: "acme/local", Input: json.RawMessage(`{}`), Claim: claim})
	if err != nil || res.Receipt.Status != holon.StatusSucceeded {
		t.Fatalf("keyed call: %v, %+v", err, res)
	}
	if !stored.Load() {
		t.Error("the keyed call ran on a reservation in memory, want it in the store")
	}
	if sg.inMemory.Load() != 0 {
		t.Errorf("%d runs on reservations in memory, want none", sg.inMemory.Load())
	}
}

// memClaim is an Idempotency-Key that the store keeps nowhere: enough to
// see which reservation a keyed call takes.
type memClaim struct{ key string }

func (c *memClaim) Check(holon.Tx) error                  { return nil }
func (c *memClaim) Record(holon.Tx, *holon.Receipt) error { return nil }
func (c *memClaim) Key() string                           { return c.key }
func (c *memClaim) Running(gateway.Claim) error {
	return holon.Errorf(holon.CodeInvalidRequest, "%s runs", c.key)
}

// Ensure that on a store several gateways share, an in-process agent that
// asks for durability (Ctx.Durable) after another gateway spent the money
// its call was admitted on is refused, with admission's code, nothing
// written, and its call denied at settlement.
func TestEngine_SharedStore_DurableRechecksAdmission(t *testing.T) {
	release, blocked := make(chan struct{}), make(chan struct{})
	var blocking atomic.Bool
	durable := make(chan error, 1)
	sg := openShared(t, 2, []string{sharedLocal}, []string{mandateWith("big", `budget: {total: "0.05"}`)}, "1.00",
		func(_ context.Context, _ json.RawMessage, c *gateway.Ctx) (any, error) {
			if blocking.CompareAndSwap(true, false) {
				close(blocked)
				<-release
				err := c.Durable()
				durable <- err
				return nil, err
			}
			return map[string]any{}, nil
		})
	blocking.Store(true)
	first := make(chan *gateway.CallResult)
	go func() { first <- sg.call(t, 0, "alice/big", "acme/local") }()
	<-blocked
	for sg.call(t, 1, "alice/big", "acme/local").Receipt.Status == holon.StatusSucceeded {
	}
	close(release)
	res := <-first
	if err := <-durable; holon.ErrorCode(err) != holon.CodeOverBudget {
		t.Errorf("Durable after the money was spent: %v, want over_budget", err)
	}
	if r := res.Receipt; r.Status != holon.StatusDenied || r.Error == nil || *r.Error != holon.CodeOverBudget || r.Billed {
		t.Errorf("the call: %s %v billed %v; want denied over_budget, nothing billed", r.Status, r.Error, r.Billed)
	}
	if n := sg.denied.Load(); n != 1 {
		t.Errorf("%d settlements denied their call, want 1", n)
	}
}

// Ensure that on a store several gateways share, receipts are numbered in
// the order their calls start to within the engine's ReceiptOrderSkew,
// though each gateway takes its in-memory calls' ids in blocks: a gateway
// whose block waited while another gateway's calls went on does not hand
// out an id below theirs for a later call.
func TestEngine_SharedStore_ReceiptOrder(t *testing.T) {
	sg := openShared(t, 2, []string{sharedLocal}, []string{mandateWith("wide", `budget: {total: "10.00"}`)}, "1.00",
		func(context.Context, json.RawMessage, *gateway.Ctx) (any, error) { return map[string]any{}, nil })
	skew := sg.engines[0].ReceiptOrderSkew()
	if skew <= 0 {
		t.Fatalf("ReceiptOrderSkew %v on a shared store, want the age of a block of ids", skew)
	}
	for _, g := range []int{0, 1, 1, 0} {
		sg.call(t, g, "alice/wide", "acme/local")
		time.Sleep(skew + skew/2)
	}
	err := sg.stores[0].View(func(tx holon.Tx) error {
		all, err := storetest.AllReceipts(tx)
		if err != nil {
			return err
		}
		if len(all) != 4 {
			t.Errorf("%d receipts, want 4", len(all))
		}
		for _, a := range all {
			for _, b := range all {
				sa, _ := holon.ReceiptSeq(a.ID)
				sb, _ := holon.ReceiptSeq(b.ID)
				if sa < sb && a.Created.After(b.Created.Add(skew)) {
					t.Errorf("%s created %s, more than %v after %s created %s", a.ID, a.Created.Format(time.RFC3339Nano), skew, b.ID, b.Created.Format(time.RFC3339Nano))
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// outageStore is a store several gateways share whose updates fail as
// the PostgreSQL store's do while the database cannot be reached, while
// down is set.
type outageStore struct {
	holon.Store
	down *atomic.Bool
}

func (s outageStore) Writers() holon.WriterSet { return holon.WritersOf(s.Store) }

func (s outageStore) NumberSkew() time.Duration { return holon.NumberSkewOf(s.Store) }

func (s outageStore) unreachable() error {
	return &holon.Error{Code: holon.CodeStoreUnavailable, Msg: "the database cannot be reached", Err: errors.New("connection refused")}
}

func (s outageStore) Update(ctx context.Context, fn func(holon.Tx) error) error {
	if s.down.Load() {
		return s.unreachable()
	}
	return s.Store.Update(ctx, fn)
}

func (s outageStore) Apply(ctx context.Context, fn func(holon.Tx) error) (holon.Commit, error) {
	if s.down.Load() {
		return nil, s.unreachable()
	}
	return s.Store.Apply(ctx, fn)
}

// Ensure that on a store several gateways share, an in-memory call whose
// settlement meets the database unreachable is handled as any call's:
// back within a few seconds, the call settles as it ran; away longer, its
// caller is answered store_unavailable naming its receipt, which is
// written failed and unbilled once the database is back. The gateway
// does not stop.
func TestEngine_SharedStore_SettlementOutage(t *testing.T) {
	var down atomic.Bool
	var outage atomic.Int64 // how long the next run's settlement finds the store away, in ms
	sg := openSharedWith(t, 1, []string{sharedLocal}, []string{mandateWith("wide", `budget: {total: "10.00"}`)}, "1.00",
		func(context.Context, json.RawMessage, *gateway.Ctx) (any, error) {
			if d := time.Duration(outage.Swap(0)) * time.Millisecond; d > 0 {
				down.Store(true)
				time.AfterFunc(d, func() { down.Store(false) })
			}
			return map[string]any{}, nil
		},
		func(s holon.Store) holon.Store { return outageStore{s, &down} }, nil)

	outage.Store(800)
	res := sg.call(t, 0, "alice/wide", "acme/local")
	if r := res.Receipt; r.Status != holon.StatusSucceeded || !r.Billed {
		t.Errorf("settled after a short outage: %s billed %v, want succeeded and billed", r.Status, r.Billed)
	}

	outage.Store(6500)
	res, err := sg.engines[0].Call(context.Background(), gateway.CallInput{Mandate: "alice/wide", Agent: "acme/local", Input: json.RawMessage(`{}`)})
	if holon.ErrorCode(err) != holon.CodeStoreUnavailable {
		t.Fatalf("after a long outage: %+v, %v; want %s", res, err, holon.CodeStoreUnavailable)
	}
	var closed *holon.Receipt
	for end := time.Now().Add(10 * time.Second); closed == nil && time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		_ = sg.stores[0].View(func(tx holon.Tx) error {
			all, err := storetest.AllReceipts(tx)
			for _, r := range all {
				if r.Status != holon.StatusSucceeded {
					closed = r
				}
			}
			return err
		})
	}
	switch {
	case closed == nil:
		t.Fatal("the call cut by the outage has no receipt once the store is back")
	case closed.Status != holon.StatusFailed || closed.Billed || !strings.Contains(err.Error(), closed.ID):
		t.Errorf("closed %s: %s billed %v; want failed, unbilled, and named by the answer (%v)", closed.ID, closed.Status, closed.Billed, err)
	}
}
