package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"holon.dev/holon"
	"holon.dev/holon/gateway/contract"
	"holon.dev/holon/journal"
)

// DefaultSignupCredit is the demo credit every new account gets (5.00).
var DefaultSignupCredit = journal.MustParseAmount("5.00")

// DemoCreditAccount is where demo money enters the platform, so that the
// sum over every account stays zero.
const DemoCreditAccount = "external:demo-credit"

// ApprovalTTL is how long a pending approval lives (mandate.md §6).
const ApprovalTTL = 7 * 24 * time.Hour

// Config wires an Engine.
type Config struct {
	Store    holon.Store
	Registry *Registry
	// Runners maps runtime.kind to the runner of that kind.
	Runners map[string]Runner
	// Now is the clock (time.Now when nil).
	Now func() time.Time
	// SignupCredit is the demo credit each issuer gets once.
	SignupCredit journal.Amount
	// Logger receives internal errors only; never inputs, outputs or keys.
	Logger *slog.Logger
	// OnStoreFailure is called when a write that must not fail did (the
	// store is broken): the process should stop, as memory and file would
	// disagree. Nil: the error is logged.
	OnStoreFailure func(error)
	// OnCall, when set, is told of every call the engine answered (root,
	// delegated or approved-and-run): its receipt as answered and how long
	// the engine took. Metrics use it; it must return quickly and never
	// keep the receipt.
	OnCall func(r *holon.Receipt, d time.Duration)
	// PublicURL is the gateway's public origin (HOLON_PUBLIC_URL): remote
	// orchestrators make their delegated calls at <PublicURL>/v0/calls.
	// Empty: remote agents that declare calls fail with gateway_error.
	PublicURL string
	// Files resolves the holon://files/ handles of inputs (files.go); nil:
	// a call whose input names a file fails file_not_found.
	Files FileStore
	// OnStep, when set, is told each step of every call's lifecycle
	// (durability.go), from the goroutine that runs the call: the crash
	// tests stop the process there. Nil in service.
	OnStep func(step, receipt string)
	// DurableReservations writes every call's reservation to the store
	// before it runs. Otherwise, on a store that allows it
	// (holon.Writers), a call to an in-process agent keeps its
	// reservation in memory until it settles (memory.go).
	DurableReservations bool
	// OnAlerts, when set, is told of the budget alerts a settlement
	// recorded, once they are durable (the webhook's delivery worker
	// wakes for them); it must return quickly.
	OnAlerts func([]*holon.Alert)
}

// Engine runs the call lifecycle of gateway.md §1 on a store.
type Engine struct {
	store    holon.Store
	registry *Registry
	runners  map[string]Runner
	now      func() time.Time
	credit   journal.Amount
	log      *slog.Logger
	fail     func(error)
	onCall   func(*holon.Receipt, time.Duration)
	onStep   func(step, receipt string)
	onAlerts func([]*holon.Alert)

	mandatesMu sync.RWMutex
	mandates   map[string]cachedMandate

	// publicURL and delegations serve remote delegation (delegation.go).
	publicURL   string
	delegations delegations

	files FileStore

	// led holds in-memory reservations (memory.go), used when memory is;
	// recheck: the store is shared with other gateways
	// (holon.SharedWriters), and each in-memory call's settlement checks
	// its admission again.
	led             *ledger
	memory, recheck bool
	// recent, on such a store, reads an in-memory admission's state
	// without a round trip when it is recent enough (memory.go).
	recent holon.RecentViews

	// doubtful are the calls whose reservation's commit may have landed
	// although the store did not answer it (settle_outage.go).
	doubtful doubts
}

type cachedMandate struct {
	stored []byte // the record it was parsed from, as stored
	m      *contract.Mandate
}

// maxCachedMandates bounds the parsed mandates kept in memory.
const maxCachedMandates = 10_000

// New returns an engine. Call Recover before serving.
func New(cfg Config) *Engine {
	e := &Engine{
		store:    cfg.Store,
		registry: cfg.Registry,
		runners:  cfg.Runners,
		now:      cfg.Now,
		credit:   cfg.SignupCredit,
		log:      cfg.Logger,
		fail:     cfg.OnStoreFailure,
		onCall:   cfg.OnCall,
		onStep:   cfg.OnStep,
		onAlerts: cfg.OnAlerts,
		mandates: map[string]cachedMandate{},

		publicURL: strings.TrimRight(cfg.PublicURL, "/"),
		files:     cfg.Files,
	}
	writers := holon.WritersOf(cfg.Store)
	e.memory = !cfg.DurableReservations && (writers == holon.SoleWriter || writers == holon.SharedWriters)
	e.recheck = writers == holon.SharedWriters
	e.led = newLedger(e.recheck)
	if rv, ok := cfg.Store.(holon.RecentViews); ok && e.recheck && e.memory {
		e.recent = rv
	}
	if e.now == nil {
		e.now = time.Now
	}
	if e.log == nil {
		e.log = slog.New(slog.DiscardHandler)
	}
	if e.fail == nil {
		e.fail = func(err error) { e.log.Error("store write failed", "err", err) }
	}
	return e
}

// Registry is the engine's agent registry.
func (e *Engine) Registry() *Registry { return e.registry }

// Store is the engine's store.
func (e *Engine) Store() holon.Store { return e.store }

// PutMandate stores a root mandate (replacing one with the same id) and
// gives its issuer the signup credit once.
func (e *Engine) PutMandate(ctx context.Context, m *contract.Mandate) error {
	if err := m.Validate(); err != nil {
		return err
	}
	raw, err := json.Marshal(m)
	if err != nil {
		return err
	}
	return e.store.Update(ctx, func(tx holon.Tx) error {
		d, err := tx.Mandate(m.ID)
		created := e.now().UTC()
		if err == nil {
			created = d.Created
		}
		if err := tx.PutMandate(m.ID, holon.Doc{Doc: raw, Created: created, Revoked: m.Revoked}); err != nil {
			return err
		}
		return e.grantSignupCredit(tx, m.Issuer)
	})
}

// grantSignupCredit journals the demo credit of an account once
// (idempotency key signup:<handle>).
func (e *Engine) grantSignupCredit(tx holon.Tx, account string) error {
	key := "signup:" + account
	if e.credit <= 0 || tx.HasEntry(key) || !contract.ValidHandle(account) {
		return nil
	}
	entry, err := journal.Transfer(key, DemoCreditAccount, account, e.credit)
	if err != nil {
		return err
	}
	return tx.PostEntry(entry)
}

// Credit journals demo credit to an account under an idempotency key.
func (e *Engine) Credit(ctx context.Context, key, account string, amount journal.Amount) error {
	entry, err := journal.Transfer(key, DemoCreditAccount, account, amount)
	if err != nil {
		return holon.Errorf(holon.CodeInvalidRequest, "%v", err)
	}
	return e.store.Update(ctx, func(tx holon.Tx) error { return tx.PostEntry(entry) })
}

// loadMandate reads a mandate in tx, parsing it once per stored version:
// while its stored record is byte for byte the one it was parsed from, the
// parsed mandate is reused without decoding anything. Root mandates are
// kept (at most maxCachedMandates); a derived sub-mandate serves one run
// and is not.
func (e *Engine) loadMandate(tx holon.Tx, id string) (*contract.Mandate, error) {
	stored := tx.MandateRevision(id)
	if stored == nil {
		return nil, holon.ErrNotFound
	}
	e.mandatesMu.RLock()
	c, ok := e.mandates[id]
	e.mandatesMu.RUnlock()
	if ok && bytes.Equal(c.stored, stored) {
		return c.m, nil
	}
	d, err := tx.Mandate(id)
	if err != nil {
		return nil, err
	}
	m, err := contract.ParseStoredMandate(d.Doc)
	if err != nil {
		return nil, fmt.Errorf("stored mandate %s: %w", id, err)
	}
	m.Revoked = m.Revoked || d.Revoked
	if m.Parent == "" {
		e.mandatesMu.Lock()
		if _, ok := e.mandates[id]; !ok && len(e.mandates) >= maxCachedMandates {
			for k := range e.mandates { // any one: the cache only saves parsing
				delete(e.mandates, k)
				break
			}
		}
		e.mandates[id] = cachedMandate{stored: bytes.Clone(stored), m: m}
		e.mandatesMu.Unlock()
	}
	return m, nil
}

// MandateState is a mandate with its budget (mandate.md §5).
// Spent and Reserved are the lifetime's; Remaining is what a call may
// still reserve now: the total less both, and no more than the current
// window has left. Window is the current window of a budget that renews
// by window.
type MandateState struct {
	Mandate   *contract.Mandate `json:"mandate"`
	Spent     journal.Amount    `json:"spent"`
	Reserved  journal.Amount    `json:"reserved"`
	Remaining journal.Amount    `json:"remaining"`
	Window    *WindowState      `json:"window,omitempty"`
}

// WindowState is the current window of a mandate's budget: when it began
// and when it renews (End), its allowance and what is spent, reserved and
// left in it.
type WindowState struct {
	contract.Window
	Timezone  string         `json:"timezone"`
	PerWindow journal.Amount `json:"per_window"`
	Spent     journal.Amount `json:"spent"`
	Reserved  journal.Amount `json:"reserved"`
	Remaining journal.Amount `json:"remaining"`
}

// Mandate returns a stored mandate (root or derived) with its spent,
// reserved and remaining budget, counting the reservations of calls in
// flight that the store does not show yet.
func (e *Engine) Mandate(id string) (*MandateState, error) {
	if e.recheck {
		return e.sharedMandate(id)
	}
	var st *MandateState
	// The ledger's lock before the read, as admissions take them.
	e.led.mu.Lock()
	defer e.led.mu.Unlock()
	err := e.store.View(func(tx holon.Tx) error {
		m, err := e.loadMandate(tx, id)
		if err != nil {
			return err
		}
		bs, err := budgetState(tx, m, e.now())
		if err != nil {
			return err
		}
		// The in-memory reservations the store does not show (memory.go),
		// not the pending durable ones: a view shows what is committed.
		// Counting those too made the overspend drill's watcher see
		// spent 0.34 + reserved 1.74 of a 2.00 total (a reservation
		// counted twice while its commit landed), which admission never
		// allowed.
		u := e.led.unseenLocked(tx, id, bs.Window.Key, "", false)
		st = mandateState(m, bs, u)
		return nil
	})
	if errors.Is(err, holon.ErrNotFound) {
		return nil, holon.Errorf(holon.CodeNotFound, "no mandate %s", id)
	}
	return st, err
}

// sharedMandate is Mandate on a store several gateways share, whose reads
// are round trips: the read does not hold the ledger's lock (admissions
// would wait for it), and asks nothing of the receipts the ledger's
// entries wrote (a round trip each): it counts the in-memory reservations
// whose settlement its receipts counter does not reach (memory.go), so
// that it never counts one twice; it may miss one whose settlement ran
// again after a failed attempt.
func (e *Engine) sharedMandate(id string) (*MandateState, error) {
	start := e.led.mark()
	var m *contract.Mandate
	var bs contract.BudgetState
	var n uint64
	err := e.store.View(func(tx holon.Tx) error {
		if ra, ok := tx.(holon.ReadsAhead); ok {
			ra.CountersAhead("receipts")
		}
		var err error
		if m, err = e.loadMandate(tx, id); err != nil {
			return err
		}
		if bs, err = budgetState(tx, m, e.now()); err != nil {
			return err
		}
		n = tx.Counter("receipts")
		return nil
	})
	if errors.Is(err, holon.ErrNotFound) {
		return nil, holon.Errorf(holon.CodeNotFound, "no mandate %s", id)
	}
	if err != nil {
		return nil, err
	}
	e.led.mu.Lock()
	u := e.led.unreadLocked(start, n, id, bs.Window.Key)
	e.led.mu.Unlock()
	return mandateState(m, bs, u), nil
}

// mandateState is a mandate's state from its budget read and what the
// read does not show.
func mandateState(m *contract.Mandate, bs contract.BudgetState, u unseen) *MandateState {
	bs.Reserved += u.reserved
	bs.WindowReserved += u.windowReserved
	st := &MandateState{Mandate: m, Spent: bs.Spent, Reserved: bs.Reserved, Remaining: bs.Left(m)}
	if m.Windowed() {
		st.Window = &WindowState{Window: bs.Window, Timezone: m.Location().String(), PerWindow: m.PerWindow(),
			Spent: bs.WindowSpent, Reserved: bs.WindowReserved, Remaining: max(m.PerWindow()-bs.WindowSpent-bs.WindowReserved, 0)}
	}
	return st
}

// Receipt reads one receipt.
func (e *Engine) Receipt(id string) (*holon.Receipt, error) {
	var r *holon.Receipt
	err := e.store.View(func(tx holon.Tx) error {
		var err error
		r, err = tx.Receipt(id)
		return err
	})
	if errors.Is(err, holon.ErrNotFound) {
		return nil, holon.Errorf(holon.CodeNotFound, "no receipt %s", id)
	}
	return r, err
}

// Receipts lists receipts newest first (of one mandate when mandate is set).
// A cursor that is not a receipt id is invalid_request; any other error is
// the store's own (a receipt that does not decode, an I/O error): internal.
func (e *Engine) Receipts(mandate, before string, limit int) (holon.ReceiptPage, error) {
	var p holon.ReceiptPage
	if _, ok := holon.ReceiptSeq(before); before != "" && !ok {
		return p, holon.Errorf(holon.CodeInvalidRequest, "before %q is not a receipt id such as r42", before)
	}
	err := e.store.View(func(tx holon.Tx) error {
		var err error
		p, err = tx.Receipts(mandate, before, limit)
		return err
	})
	if err != nil {
		return p, fmt.Errorf("receipts of %q: %w", mandate, err)
	}
	return p, nil
}

// Account reads one account's balance and holds (zero for an account
// nothing was journaled to yet).
func (e *Engine) Account(name string) (holon.Account, error) {
	var a holon.Account
	err := e.store.View(func(tx holon.Tx) (err error) {
		a, err = tx.Account(name)
		return err
	})
	return a, err
}

// Accounts lists every account's balance and holds: the operator's view.
func (e *Engine) Accounts() (map[string]holon.Account, error) {
	out := map[string]holon.Account{}
	err := e.store.View(func(tx holon.Tx) error {
		return tx.ForEachAccount(func(name string, a holon.Account) error {
			out[name] = a
			return nil
		})
	})
	return out, err
}

// Record returns an agent version's measured record.
func (e *Engine) Record(ref string) (holon.Record, error) {
	var r holon.Record
	err := e.store.View(func(tx holon.Tx) error {
		var err error
		r, err = tx.Record(ref)
		return err
	})
	return r, err
}

// Now is the engine's clock.
func (e *Engine) Now() time.Time { return e.now() }
