package kv

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"
	"holon.dev/holon"
)

// Bucket names. Every bucket is created when the store is opened.
var (
	bucketAgents         = []byte("agents")              // ns/name@version → AgentRecord
	bucketMandates       = []byte("mandates")            // mandate id → MandateRecord
	bucketBudgets        = []byte("budgets")             // mandate id → Budget
	bucketBudgetWindows  = []byte("budget_windows")      // mandate id 0x00 window key → Budget
	bucketAccounts       = []byte("accounts")            // account → Account (balance, held)
	bucketJournal        = []byte("journal")             // seq (8 bytes) → JournalRow
	bucketJournalKeys    = []byte("journal_keys")        // idempotency key → seq
	bucketReceipts       = []byte("receipts")            // seq (8 bytes) → Receipt
	bucketReceiptsByMand = []byte("receipts_by_mandate") // mandate id 0x00 seq → nil
	bucketApprovals      = []byte("approvals")           // seq (8 bytes) → Approval
	bucketHolds          = []byte("holds")               // receipt id → Hold (calls in flight)
	bucketEvents         = []byte("call_events")         // seq (8 bytes) → Event
	bucketRecords        = []byte("records")             // agent ref → Record
	bucketCounters       = []byte("counters")            // name → uint64
	bucketMeta           = []byte("meta")                // schema version, journal head
)

// bucketApprovalsByMand indexes the approvals by mandate: mandate id 0x00
// seq → nil. It is derived from the approvals bucket, so it is not one of
// Buckets(): Export leaves it out (a backup is the same with or without
// it), and Open and Restore rebuild it from the approvals when it is
// missing (approvals_index.go).
var bucketApprovalsByMand = []byte("approvals_by_mandate")

// Buckets lists every bucket, for backups and consistency checks.
func Buckets() []string {
	var names []string
	for _, b := range allBuckets {
		names = append(names, string(b))
	}
	return names
}

var allBuckets = [][]byte{
	bucketAgents, bucketMandates, bucketBudgets, bucketBudgetWindows, bucketAccounts, bucketJournal,
	bucketJournalKeys, bucketReceipts, bucketReceiptsByMand, bucketApprovals,
	bucketHolds, bucketEvents, bucketRecords, bucketCounters, bucketMeta,
}

// laterBuckets were added to the layout after stores of its version were
// written: Open creates them, and a store opened read-only (holon verify,
// holon backup of a stopped gateway's file) may lack them, and reads as
// if they were empty.
var laterBuckets = map[string]bool{string(bucketBudgetWindows): true, holon.BucketRefunds: true,
	holon.BucketAlerts: true, holon.BucketWebhooks: true, holon.BucketAlertOutbox: true}

// SchemaVersion is the layout of the buckets' rows, as a backup holds them
// (the file's own layout is FileFormat, receipts_index.go).
const SchemaVersion = 1

// setUp reports whether createBuckets has nothing to do in btx: every
// bucket there, the file's format current.
func setUp(btx *bolt.Tx) bool {
	for _, name := range allBuckets {
		if btx.Bucket(name) == nil {
			return false
		}
	}
	v := btx.Bucket(bucketMeta).Get([]byte("schema"))
	format := uint64(0)
	if len(v) == 8 {
		format = binary.BigEndian.Uint64(v)
	}
	return (format == FileFormat || format == FileFormatLogging) &&
		btx.Bucket(bucketReceiptsLog) != nil && btx.Bucket(bucketRollups) != nil &&
		btx.Bucket(bucketApprovalsByMand) != nil
}

func createBuckets(btx *bolt.Tx) error {
	for _, name := range allBuckets {
		if _, err := btx.CreateBucketIfNotExists(name); err != nil {
			return fmt.Errorf("create bucket %s: %w", name, err)
		}
	}
	if err := checkFormat(btx); err != nil {
		return err
	}
	if err := createRollups(btx); err != nil {
		return err
	}
	if btx.Bucket(bucketApprovalsByMand) == nil {
		// A new store, or one written before the index existed.
		return buildApprovalIndex(btx)
	}
	return nil
}

// Tx is a transaction on the store: read-only inside View, writable inside
// Update. It offers Holon's records, never raw buckets, so the journal's
// rules cannot be bypassed.
type Tx struct {
	btx      *bolt.Tx
	now      func() time.Time
	writable bool
	// arena holds the encoded values of a write transaction: bbolt keeps
	// the slices it is given until the commit, so they are carved from
	// large blocks instead of allocated one by one.
	arena []byte
	// cache is the write transaction's cache of shared records (cache.go);
	// nil in a read-only transaction.
	cache *writeCache
	// undo logs how to take back the current update's writes (undo.go),
	// while logging: in the writer's transactions, while updates run.
	undo    []undoStep
	logging bool
	// update numbers the updates of the transaction (from 1), for the
	// write cache's undo.
	update uint64
	// overdrafts are the accounts the current update moved, with what
	// they had available before it (holon.Overdrafts).
	overdrafts holon.Overdrafts
	// limits are the budgets' limits the current update declared, and the
	// budgets it moved (holon.BudgetLimits).
	limits holon.BudgetLimits
	// logged counts the keys this transaction added to the receipt index's
	// log (updates undone included: it only tells the writer when to fold).
	logged int
	// cursors are the cursors the undo log reads old values with.
	cursors map[*bolt.Bucket]*bolt.Cursor
	// redo collects the transaction's writes for the store's log
	// (redo.go); nil outside the writer's transactions.
	redo *redoBuf
	// pend holds the rows committed before this transaction that
	// bbolt does not hold yet (deferred.go): a snapshot's, or in the
	// writer's transactions the last commit's, until materialize puts them
	// into bbolt.
	pend *pending
	// deferring says the writer's transaction puts its new rows of the
	// deferred buckets into its log record and deferred, not into bbolt;
	// materialized, that it put pend into bbolt (nothing is pending after
	// it commits).
	deferring, materialized bool
	deferred                [len(deferredBuckets)]map[string][]byte
	// wroteApp has the bit (appBit) of every app bucket the transaction
	// wrote to (Store.BucketChanges).
	wroteApp uint32
}

// Now is the store's clock.
func (tx *Tx) Now() time.Time { return tx.now() }

func u64(n uint64) []byte {
	b := make([]byte, 8)
	binary.BigEndian.PutUint64(b, n)
	return b
}

func (tx *Tx) getJSON(bucket, key []byte, v any) error {
	b := tx.get(bucket, key) // nil for a later bucket, in a store opened read-only
	if b == nil {
		return holon.ErrNotFound
	}
	if err := decodeValue(b, v); err != nil {
		return fmt.Errorf("decode %s/%s: %w", bucket, key, err)
	}
	return nil
}

func (tx *Tx) putJSON(bucket, key []byte, v any) error {
	b, err := tx.encodeFor(bucket, key, v)
	if err != nil {
		return err
	}
	return tx.put(tx.bucket(bucket), key, b)
}

// encodeFor encodes v to be written under key in bucket, in a write
// transaction.
func (tx *Tx) encodeFor(bucket, key []byte, v any) ([]byte, error) {
	if !tx.writable {
		return nil, errors.New("write in a read-only transaction")
	}
	b, err := tx.encode(v)
	if err != nil {
		return nil, fmt.Errorf("encode %s/%s: %w", bucket, key, err)
	}
	return b, nil
}

// bucket returns a bucket of a write transaction. The buckets written in
// sequence order (receipts, journal rows, call events) fill their pages
// before splitting them, where bbolt leaves them half empty for random
// inserts: a commit then touches (and writes) fewer pages, and the file is
// smaller. A receipt is rewritten once, a little larger, when its call
// settles: its pages keep some room for that.
func (tx *Tx) bucket(name []byte) *bolt.Bucket {
	b := tx.bkt(name)
	b.FillPercent = fillPercent(name)
	return b
}

// bkt is btx.Bucket (nil when there is none); in the writer's
// transactions it tells the log's record the bucket's name (redo.go).
func (tx *Tx) bkt(name []byte) *bolt.Bucket {
	b := tx.btx.Bucket(name)
	if b != nil && tx.redo != nil {
		tx.redo.known(b, name)
	}
	return b
}

// fillPercent is how full a bucket's pages are filled before they split
// (see bucket).
func fillPercent(name []byte) float64 {
	switch string(name) {
	case string(bucketJournal), string(bucketEvents):
		return 1.0
	case string(bucketReceipts):
		return 0.9
	}
	return bolt.DefaultFillPercent
}

// Arena blocks start small (a transaction of one update writes a few KB)
// and double up to arenaMax for a large batch.
const (
	arenaMin = 4 << 10
	arenaMax = 64 << 10
)

// encode encodes v into the transaction's arena. The slice stays valid (and
// unchanged) for the life of the transaction, as bbolt needs.
func (tx *Tx) encode(v any) ([]byte, error) {
	if cap(tx.arena)-len(tx.arena) < 1024 {
		tx.arena = make([]byte, 0, min(max(2*cap(tx.arena), arenaMin), arenaMax))
	}
	start := len(tx.arena)
	b, err := encodeValue(tx.arena, v)
	if err != nil {
		return nil, err
	}
	tx.arena = b
	// Capped, so that nothing appended to the arena later can reach it.
	return b[start:len(b):len(b)], nil
}

// CounterAt tells f the counter's value now, at once.
func (tx *Tx) CounterAt(name string, f func(uint64)) { f(tx.Counter(name)) }

// Counter returns a named counter (0 when never incremented).
func (tx *Tx) Counter(name string) uint64 {
	if tx.cache != nil {
		n, _ := cachedGet(&tx.cache.counters, tx.cache.hot.counters, name, func() (uint64, error) { return tx.readCounter(name), nil })
		return n
	}
	return tx.readCounter(name)
}

func (tx *Tx) readCounter(name string) uint64 {
	v := tx.get(bucketCounters, []byte(name))
	if v == nil {
		return 0
	}
	return binary.BigEndian.Uint64(v)
}

// AddCounter adds delta to a named counter and returns the new value.
func (tx *Tx) AddCounter(name string, delta int64) (uint64, error) {
	n := int64(tx.Counter(name)) + delta
	if n < 0 {
		return 0, fmt.Errorf("counter %s would go below zero", name)
	}
	if tx.cache != nil {
		cachedPut(tx, &tx.cache.counters, name, uint64(n))
		return uint64(n), nil
	}
	return uint64(n), tx.put(tx.bkt(bucketCounters), []byte(name), u64(uint64(n)))
}
