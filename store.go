package holon

import (
	"context"
	"encoding/json"
	"time"

	"holon.dev/holon/journal"
)

// Store is what the engine needs of a store: serializable transactions
// whose writes are grouped into durable commits. Package kv implements it
// on bbolt; a second implementation must pass the shared suite in package
// holon.dev/holon/gateway/storetest (webui/manual/architecture.md, "A second store").
type Store interface {
	// View runs fn in a read-only transaction that sees one consistent
	// state of the store.
	View(fn func(Tx) error) error
	// Update runs fn in a write transaction and returns once it is
	// committed and durable, or fn's error with nothing of it written. An
	// error from fn (or its panic) is its own: the other updates grouped
	// into the same commit are not affected. A store may run fn more than
	// once (a run it drops is undone whole): what fn gathers outside the
	// transaction is the last run's, to read once Update returns.
	Update(ctx context.Context, fn func(Tx) error) error
	// Apply runs fn as Update does, but returns as soon as fn's writes are
	// part of a commit that nothing can undo short of the commit failing;
	// Commit.Wait then waits for that commit to be durable. A failed commit
	// after Apply returned breaks the store: every later update is
	// ErrBroken.
	Apply(ctx context.Context, fn func(Tx) error) (Commit, error)
	// Stats describes the store's size and write path since it opened.
	Stats() StoreStats
	// Close waits for the updates submitted so far and closes the store.
	Close() error
}

// Writers is implemented by a store that says which processes write it.
// The engine keeps the reservations of calls to in-process agents in
// memory until they settle (gateway/memory.go) only on a store that
// implements it: how it may depends on the answer.
type Writers interface {
	Writers() WriterSet
}

// WriterSet is who writes a store.
type WriterSet uint8

const (
	// SoleWriter: only this process writes the store (package kv's). A
	// call's reservation may stay in memory, visible to this process's
	// admissions, and the engine's ledger with the store is exact: no
	// other process admits calls on the same money.
	SoleWriter WriterSet = iota + 1
	// SharedWriters: several gateways write the store, each update in a
	// transaction serialized with every other gateway's (package pg's:
	// the writers' lock). A call's reservation may stay in memory only
	// because its settlement re-checks the call's admission in its own
	// transaction, against what every gateway committed, and writes the
	// denial instead when another gateway spent the money meanwhile.
	SharedWriters
)

// WritersOf is what s says of its writers (0 when it says nothing: every
// reservation is then written before its call runs).
func WritersOf(s Store) WriterSet {
	if w, ok := s.(Writers); ok {
		return w.Writers()
	}
	return 0
}

// NumberSkew is implemented by a store whose writers hand out the numbers
// of receipts, approvals, journal rows and call events from blocks they
// take ahead (several gateways on one database): NumberSkew is how much
// later than a number above it a number may be handed out. Numbers are
// otherwise handed out in the order of the commits that take them.
type NumberSkew interface{ NumberSkew() time.Duration }

// NumberSkewOf is s's NumberSkew, or zero.
func NumberSkewOf(s Store) time.Duration {
	if n, ok := s.(NumberSkew); ok {
		return n.NumberSkew()
	}
	return 0
}

// Changes is what a store whose every writer is this process may say of
// its app buckets: BucketChanges is a number that grows whenever a commit
// that wrote to bucket becomes visible to readers, before that commit's
// callers hear it committed. A reader that reads the number, then reads
// the bucket, and later reads the same number again knows that the
// bucket has not changed since its read: what it decoded then still
// holds (accounts' key check keeps what it read so).
type Changes interface {
	BucketChanges(bucket string) uint64
}

// StoreOptions configure a store as the hosted product opens it.
type StoreOptions struct {
	// NoSync skips making commits durable: for tests and benchmarks of the
	// CPU path only. A gateway never runs with it.
	NoSync bool
	// Now is the clock written on journal rows (time.Now when nil).
	Now func() time.Time
	// OnCommit, when set, is told the number of updates in each commit; it
	// must return quickly.
	OnCommit func(batch int)
	// OnFailure, when set, is told when a commit fails: the store then
	// refuses every update (ErrBroken) and the process should stop.
	OnFailure func(error)
}

// OpenStore opens the store at path (kv.OpenStore for bbolt).
type OpenStore func(path string, opts StoreOptions) (Store, error)

// StoreStats describes a store's size and write path.
type StoreStats struct {
	// SizeBytes is the size of the store on disk.
	SizeBytes int64
	// Commits is the number of durable commits; Updates the number of
	// updates they held (Updates/Commits is the mean batch); MaxBatch the
	// largest.
	Commits, Updates uint64
	MaxBatch         int
	// Replays counts the write transactions rolled back because one of
	// their updates panicked, whose other updates then ran again (an update
	// that fails is undone alone, and nothing runs again).
	Replays uint64
}

// Commit is the durability of an update that Store.Apply returned early
// from.
type Commit interface {
	// Wait returns once the update is durable (nil) or its commit failed.
	// Any number of goroutines may call it, any number of times.
	Wait() error
}

// Tx is a transaction on a Store: read-only inside View, writable inside
// Update and Apply. It offers Holon's records, never raw storage, so the
// journal's rules cannot be bypassed: every entry sums to zero, its
// idempotency key is used once, and a journal row is never rewritten.
type Tx interface {
	// Now is the store's clock, the time written on journal rows.
	Now() time.Time

	JournalTx
	CallsTx
	RegistryTx
	CountersTx
	DocsTx
	RollupsTx
}

// JournalTx is the money: journal entries and the accounts they move.
type JournalTx interface {
	// AppendEntry journals an entry (its lines sum to zero, its key is new:
	// ErrDuplicateKey otherwise) and moves the accounts' balances; it
	// returns the row, hash-chained to the one before it on the store
	// writer's chain (Chains). A store may find
	// the key used only once the update's writes reach it: the update then
	// fails with ErrDuplicateKey, so an update must not go past that error
	// expecting the rest of it to commit.
	AppendEntry(e journal.Entry) (JournalRow, error)
	// PostEntry journals an entry as AppendEntry does, without its row:
	// an update that needs neither the entry's number nor its hash says
	// so, and a store several gateways share may then number and chain
	// it after the entries another gateway committed meanwhile.
	PostEntry(e journal.Entry) error
	// HasEntry reports whether an entry with this key is journaled.
	HasEntry(key string) bool
	// EntryByKey reads the row of the entry with this key (ErrNotFound).
	EntryByKey(key string) (JournalRow, error)
	// ForEachEntry calls fn for every row after sequence number after, in
	// order, until fn returns false.
	ForEachEntry(after uint64, fn func(JournalRow) (bool, error)) error
	// Account reads an account (zero when it never moved).
	Account(name string) (Account, error)
	// ForEachAccount calls fn for every account, in name order.
	ForEachAccount(fn func(name string, a Account) error) error
	// AddHeld moves what is held on an account by delta (positive to hold,
	// negative to release); what is held never goes below zero.
	AddHeld(account string, delta journal.Amount) error
}

// CallsTx is the state of calls: receipts, budgets, holds, approvals and
// the events and records of finished runs.
type CallsTx interface {
	// NewReceiptID reserves the next receipt id ("r" and an increasing
	// sequence number, see ReceiptSeq).
	NewReceiptID() (string, error)
	// PutReceipt writes a new receipt or the final state of one.
	PutReceipt(r *Receipt) error
	// Receipt reads one receipt (ErrNotFound).
	Receipt(id string) (*Receipt, error)
	// Receipts lists receipts newest first, all or those of one mandate,
	// before the receipt id before ("" for the newest), at most limit,
	// reading only the page.
	Receipts(mandate, before string, limit int) (ReceiptPage, error)

	// Budget reads a mandate's spending (zero when nothing ran under it).
	Budget(mandate string) (Budget, error)
	// AddBudget moves a mandate's spent and reserved amounts; neither may
	// go below zero.
	AddBudget(mandate string, spent, reserved journal.Amount) error
	// WindowBudget reads a mandate's spending in one of its budget windows
	// (the window's key, such as "day:2026-12-02"; zero when nothing ran in
	// it); AddWindowBudget moves it as AddBudget moves the lifetime's.
	WindowBudget(mandate, window string) (Budget, error)
	AddWindowBudget(mandate, window string, spent, reserved journal.Amount) error
	// LimitBudget declares, for the rest of the update, the limit of a
	// mandate's budget (window "": the lifetime's) that its moves may not
	// raise it above (BudgetLimits: ErrOverBudget when the update ends);
	// nothing in a read-only transaction.
	LimitBudget(mandate, window string, limit journal.Amount)

	// PutHold records a call in flight; Hold reads it (ErrNotFound);
	// DeleteHold forgets it once the call settled; Holds lists them all.
	// A store several gateways share refuses to delete a hold that is no
	// longer there (ErrChangedMeanwhile: another gateway closed the call
	// since the update read it), so that its amount is released once.
	PutHold(h *Hold) error
	Hold(receipt string) (*Hold, error)
	DeleteHold(receipt string) error
	Holds() ([]*Hold, error)

	// NewApprovalID reserves the next approval id ("a" and an increasing
	// sequence number, see ApprovalSeq).
	NewApprovalID() (string, error)
	// PutApproval writes an approval; Approval reads one (ErrNotFound).
	PutApproval(a *Approval) error
	Approval(id string) (*Approval, error)
	// Approvals lists approvals newest first that keep accepts, at most
	// limit.
	Approvals(keep func(*Approval) bool, limit int) ([]*Approval, error)
	// ApprovalsOf lists the approvals of the given mandates newest first,
	// from their index: those before the approval id before ("" for the
	// newest) that keep accepts, at most limit, decoding at most scan
	// (at least limit); a page that stops early has a Next.
	ApprovalsOf(mandates []string, before string, keep func(*Approval) bool, limit, scan int) (ApprovalPage, error)
	// ApprovalsBefore is ApprovalsOf over every mandate's approvals.
	ApprovalsBefore(before string, keep func(*Approval) bool, limit, scan int) (ApprovalPage, error)

	// AppendEvent records a finished run (setting its Seq) and adds it to
	// its agent's record.
	AppendEvent(ev *Event, succeeded bool) error
	// PostEvent records a finished run as AppendEvent does, without
	// telling its Seq (as PostEntry).
	PostEvent(ev Event, succeeded bool) error
	// Events lists events before sequence number before (0: the newest),
	// newest first, at most limit.
	Events(before uint64, limit int) ([]*Event, error)
	// Record reads an agent version's record (zero when it never ran).
	Record(agent string) (Record, error)
	// RefundRecord takes a refund of one of an agent version's runs off
	// its record: Billed goes down by amount (never below zero: an error,
	// and nothing changes); its runs stay counted, as they ran.
	RefundRecord(agent string, amount journal.Amount) error

	// AddEarnings adds to a version's earnings in a currency; Earnings
	// reads them; ForEachEarnings walks the versions whose ref starts with
	// prefix; EarningsFrom is the first journal row counted (false when
	// none was).
	AddEarnings(ref, currency string, paidCalls int64, own, royalties journal.Amount) error
	Earnings(ref string) (Earnings, error)
	ForEachEarnings(prefix string, fn func(ref string, e Earnings) error) error
	EarningsFrom() (uint64, bool)
	// AddLatency counts one settled run of a version; Latency reads its
	// histogram; ForEachLatency walks them; LatencyFrom is the first call
	// event counted (false when none was).
	AddLatency(ref string, ms int64) error
	Latency(ref string) (Latency, error)
	ForEachLatency(fn func(ref string, l Latency) error) error
	LatencyFrom() (uint64, bool)
}

// RegistryTx holds the contracts: mandates and agent versions, stored as
// documents the store does not interpret.
type RegistryTx interface {
	PutMandate(id string, d Doc) error
	// Mandate reads a mandate (ErrNotFound).
	Mandate(id string) (Doc, error)
	// MandateRevision is an opaque revision of a mandate's record: two
	// equal revisions read in two transactions mean the record did not
	// change in between. Nil when there is none; the slice is valid only
	// during the transaction (a caller keeping it keeps a copy).
	MandateRevision(id string) []byte
	ForEachMandate(fn func(id string, d Doc) error) error
	PutAgent(ref string, d Doc) error
	// Agent reads an agent version by ref ("ns/name@version", ErrNotFound).
	Agent(ref string) (Doc, error)
	ForEachAgent(fn func(ref string, d Doc) error) error
}

// CountersTx is named counters that never go below zero.
type CountersTx interface {
	// Counter reads a counter (0 when never moved).
	Counter(name string) uint64
	// AddCounter adds delta and returns the new value.
	AddCounter(name string, delta int64) (uint64, error)
	// CounterAt tells f, before any reader can see the update's commit,
	// a value the counter reaches with this point of the update and
	// holds once the commit is seen: its value here, or the one the
	// commit leaves (for a use that needs only that, such as "a reader
	// whose counter reached it sees the commit"), so that an update on
	// a store several gateways share need not run again for it. f is
	// called even if the commit then fails.
	CounterAt(name string, f func(uint64))
}

// DocsTx is the hosted product's documents (bucket names in docs.go):
// JSON values under string keys, read in key order.
type DocsTx interface {
	// Put stores v as JSON under key (an append-only bucket refuses
	// overwrites).
	Put(bucket, key string, v any) error
	// Get reads the document under key into v (ErrNotFound).
	Get(bucket, key string, v any) error
	// Delete removes a document (not from an append-only bucket).
	Delete(bucket, key string) error
	// ForEach calls fn for every document whose key starts with prefix, in
	// key order, until fn returns false.
	ForEach(bucket, prefix string, fn func(key string, raw json.RawMessage) (bool, error)) error
	// ForEachAfter is ForEach from the first key after after ("" starts at
	// the prefix), without reading the keys before it.
	ForEachAfter(bucket, prefix, after string, fn func(key string, raw json.RawMessage) (bool, error)) error
	// Append stores v under the bucket's next sequence number (keys that
	// sort in order) and returns it.
	Append(bucket string, v any) (uint64, error)
}

// ReceiptChecker is implemented by the transactions of a store that can
// tell whether a receipt is stored without decoding it (package kv's): an
// in-memory admission asks it of each call whose settlement may have
// committed (gateway/memory.go).
type ReceiptChecker interface {
	// HasReceipt reports whether the receipt is stored.
	HasReceipt(id string) bool
}

// RecordsAhead is implemented by the transactions of a store whose reads
// are round trips to a server (the PostgreSQL store): the records of the
// agent versions named are read with the transaction's next round trip,
// so that Record then costs none. Admission names its candidates' before
// it reads the mandate and budget. A store whose reads cost no round trip
// (package kv's) need not implement it.
type RecordsAhead interface {
	RecordsAhead(agents ...string)
}

// ExactBudgets is implemented by the transactions of a store whose
// writers' idea of a budget may lack other gateways' moves (the
// PostgreSQL store): ExactBudget reads a mandate's budget, or its
// spending in a window (window not ""), as the transaction's commit
// leaves it, whatever other gateways do meanwhile. A budget alert's
// threshold is judged so: a store without it reads Budget and
// WindowBudget, which are exact there.
type ExactBudgets interface {
	ExactBudget(mandate, window string) (Budget, error)
}

// RecentViews is implemented by a store several gateways share whose
// process keeps in memory the rows its writer last saw committed (the
// PostgreSQL store).
type RecentViews interface {
	// ViewRecent runs fn as View does, with no round trip, on one
	// consistent state that was the committed one at most maxAge ago and
	// that holds every update this store answered: only other gateways'
	// commits since then may be missing. ok is false when it cannot (that
	// state is older, or fn asked for a row it does not keep, and fn was
	// stopped there): the caller must then undo what fn did and run View.
	// On a store whose gateways' writers overlap (the PostgreSQL store's
	// option), the rows other gateways move (balances, budgets, counters,
	// agents' records) may also lack their moves of the last second.
	// An in-memory admission reads so (gateway/memory.go): its
	// settlement checks it again, and the store's commit judges every
	// balance and budget against what every gateway committed.
	ViewRecent(maxAge time.Duration, fn func(Tx) error) (ok bool, err error)
}

// ReadsAhead is implemented, as RecordsAhead, by the transactions of a
// store whose reads are round trips to a server: the accounts and
// counters named are read with the transaction's next round trip, so
// that Account and Counter then cost none. An in-memory admission on a
// store several gateways share names the payer's account and the
// receipts counter before resolve reads the mandate (gateway/memory.go).
type ReadsAhead interface {
	AccountsAhead(names ...string)
	CountersAhead(names ...string)
}

// SharedTx is implemented by the transactions of a store several gateways
// serve from at once (the PostgreSQL store), where a call in flight may be
// another running gateway's.
type SharedTx interface {
	// Orphaned reports whether the call in flight under this receipt is
	// held by no running gateway: the gateway that admitted it stopped, or
	// its lease ran out. Only those are closed (Engine.Recover).
	Orphaned(receipt string) (bool, error)
}

// RegistryRevision is the counter a store several gateways share
// (SharedStore) moves with every write of an agent version, of an
// evaluation's verdict (BucketEvals) or of an operator's yank
// (BucketSettings, keys "yanked/…"): a gateway that keeps the registry in
// memory reads the others' changes again only when it moved.
const RegistryRevision = "registry_revision"

// SharedStore is implemented by a store several gateways serve from at
// once. Each holds a lease on it; a gateway whose lease runs out (it
// died) has its calls in flight closed by the others, which run
// Engine.Recover about twice per Lease.
type SharedStore interface {
	Lease() time.Duration
}
