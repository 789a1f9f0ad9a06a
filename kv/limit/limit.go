// Package limit is the yardstick of `holon bench` and nothing else: the
// smallest durable store doing what a settled call must make durable, so
// that the bench can print the gateway's throughput as a share of it.
//
// It is built the way one would build such a store on bbolt when speed is
// all that counts, and no further: one writer goroutine groups up to
// MaxBatch waiting settlements into one write transaction, committed with
// one fsync (bbolt's defaults: fsync on, the free list synced); balances and
// budgets are fixed 8- and 16-byte values; receipts and journal entries are
// appended under sequential keys as compact JSON. Each settlement checks the
// idempotency key, the budget and the payer's funds before it writes, so a
// refused one writes nothing and never costs its neighbours a rollback.
//
// What it leaves out is what makes it a yardstick: no mandates beyond a
// budget, no holds (the agent runs in-process, between the checks and the
// writes there is nothing to wait for), no events, records, hash chain,
// indexes or application rules. A gateway doing all of that at a large
// share of this store's rate loses little to its design.
package limit

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"time"

	bolt "go.etcd.io/bbolt"

	"holon.dev/holon/journal"
)

// Refusals of a settlement.
var (
	ErrDuplicate   = errors.New("idempotency key already used")
	ErrOverBudget  = errors.New("over budget")
	ErrNoFunds     = errors.New("insufficient funds")
	ErrNoMandate   = errors.New("no such mandate")
	errStoreClosed = errors.New("store is closed")
)

var (
	bucketReceipts = []byte("receipts")
	bucketJournal  = []byte("journal")
	bucketKeys     = []byte("keys")
	bucketBalances = []byte("balances")
	bucketBudgets  = []byte("budgets")
)

// Store is the yardstick's store.
type Store struct {
	db       *bolt.DB
	now      func() time.Time
	maxBatch int
	reqs     chan *settleReq
	quit     chan struct{}
	done     chan struct{}
}

// Settlement is one call to settle: the payer pays Price out of the
// mandate's budget, split as Shares; Key is its idempotency key.
type Settlement struct {
	Key, Mandate, Payer, Agent string
	Price                      journal.Amount
	Shares                     []journal.Share
}

type settleReq struct {
	s    *Settlement
	id   uint64
	err  error
	done chan struct{}
}

// Open opens (or creates) the store at path; maxBatch bounds a group commit.
func Open(path string, maxBatch int) (*Store, error) {
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: 2 * time.Second, FreelistType: bolt.FreelistMapType})
	if err != nil {
		return nil, fmt.Errorf("open the yardstick store: %w", err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		for _, b := range [][]byte{bucketReceipts, bucketJournal, bucketKeys, bucketBalances, bucketBudgets} {
			if _, err := tx.CreateBucketIfNotExists(b); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		db.Close()
		return nil, err
	}
	s := &Store{db: db, now: time.Now, maxBatch: max(maxBatch, 1), reqs: make(chan *settleReq, 4096), quit: make(chan struct{}), done: make(chan struct{})}
	go s.write()
	return s, nil
}

// Fund credits an account from an external one (both balances written, so
// that balances keep summing to zero) and sets a mandate's budget.
func (s *Store) Fund(account, external string, amount journal.Amount, mandate string, budget journal.Amount) error {
	return s.db.Update(func(tx *bolt.Tx) error {
		bal := tx.Bucket(bucketBalances)
		if err := add(bal, account, amount); err != nil {
			return err
		}
		if err := add(bal, external, -amount); err != nil {
			return err
		}
		return tx.Bucket(bucketBudgets).Put([]byte(mandate), binary.BigEndian.AppendUint64(u64(uint64(budget)), 0))
	})
}

// Settle makes a settlement durable, grouped with whatever else waits, and
// returns its receipt's number.
func (s *Store) Settle(ctx context.Context, st *Settlement) (uint64, error) {
	r := &settleReq{s: st, done: make(chan struct{})}
	select {
	case s.reqs <- r:
	case <-s.quit:
		return 0, errStoreClosed
	case <-ctx.Done():
		return 0, ctx.Err()
	}
	select {
	case <-r.done:
		return r.id, r.err
	case <-s.done:
		return 0, errStoreClosed
	}
}

// write is the one writer: it takes what waits (up to maxBatch) into one
// transaction and commits it.
func (s *Store) write() {
	defer close(s.done)
	batch := make([]*settleReq, 0, s.maxBatch)
	for {
		batch = batch[:0]
		select {
		case r := <-s.reqs:
			batch = append(batch, r)
		case <-s.quit:
			return
		}
	fill:
		for len(batch) < s.maxBatch {
			select {
			case r := <-s.reqs:
				batch = append(batch, r)
			default:
				break fill
			}
		}
		err := s.db.Update(func(tx *bolt.Tx) error {
			w := txWriter{tx: tx, now: s.now().UTC()}
			for _, r := range batch {
				if r.id, r.err = w.settle(r.s); r.err != nil && !refusal(r.err) {
					return r.err
				}
			}
			return nil
		})
		for _, r := range batch {
			if err != nil {
				r.id, r.err = 0, err
			}
			close(r.done)
		}
	}
}

func refusal(err error) bool {
	return errors.Is(err, ErrDuplicate) || errors.Is(err, ErrOverBudget) || errors.Is(err, ErrNoFunds) || errors.Is(err, ErrNoMandate)
}

// txWriter writes settlements into one transaction.
type txWriter struct {
	tx  *bolt.Tx
	now time.Time
}

// settle checks, then writes: the key, the budget, the balances, the
// receipt and the journal entry.
func (w *txWriter) settle(st *Settlement) (uint64, error) {
	keys, budgets, bal := w.tx.Bucket(bucketKeys), w.tx.Bucket(bucketBudgets), w.tx.Bucket(bucketBalances)
	if keys.Get([]byte(st.Key)) != nil {
		return 0, ErrDuplicate
	}
	b := budgets.Get([]byte(st.Mandate))
	if len(b) != 16 {
		return 0, ErrNoMandate
	}
	total, spent := journal.Amount(binary.BigEndian.Uint64(b)), journal.Amount(binary.BigEndian.Uint64(b[8:]))
	if spent+st.Price > total {
		return 0, ErrOverBudget
	}
	if balance(bal, st.Payer) < st.Price {
		return 0, ErrNoFunds
	}
	receipts, entries := w.tx.Bucket(bucketReceipts), w.tx.Bucket(bucketJournal)
	id, err := receipts.NextSequence()
	if err != nil {
		return 0, err
	}
	seq, err := entries.NextSequence()
	if err != nil {
		return 0, err
	}
	nb := binary.BigEndian.AppendUint64(binary.BigEndian.AppendUint64(make([]byte, 0, 16), uint64(total)), uint64(spent+st.Price))
	if err := budgets.Put([]byte(st.Mandate), nb); err != nil {
		return 0, err
	}
	if err := add(bal, st.Payer, -st.Price); err != nil {
		return 0, err
	}
	for _, sh := range st.Shares {
		if err := add(bal, sh.To, sh.Amount); err != nil {
			return 0, err
		}
	}
	if err := keys.Put([]byte(st.Key), u64(id)); err != nil {
		return 0, err
	}
	if err := receipts.Put(u64(id), w.receipt(id, st)); err != nil {
		return 0, err
	}
	if err := entries.Put(u64(seq), w.entry(id, st)); err != nil {
		return 0, err
	}
	return id, nil
}

func (w *txWriter) receipt(id uint64, st *Settlement) []byte {
	// A fresh slice for each value: bbolt keeps it until the commit.
	b := append(make([]byte, 0, 256), `{"id":"r`...)
	b = strconv.AppendUint(b, id, 10)
	b = append(b, `","mandate":`...)
	b = strconv.AppendQuote(b, st.Mandate)
	b = append(b, `,"payer":`...)
	b = strconv.AppendQuote(b, st.Payer)
	b = append(b, `,"agent":`...)
	b = strconv.AppendQuote(b, st.Agent)
	b = append(b, `,"status":"succeeded","billed":true,"cost":"`...)
	b = append(b, st.Price.String()...)
	b = append(b, `","splits":[`...)
	for i, sh := range st.Shares {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"to":`...)
		b = strconv.AppendQuote(b, sh.To)
		b = append(b, `,"amount":"`...)
		b = append(b, sh.Amount.String()...)
		b = append(b, `"}`...)
	}
	b = append(b, `],"created":"`...)
	b = w.now.AppendFormat(b, time.RFC3339Nano)
	return append(b, `"}`...)
}

func (w *txWriter) entry(id uint64, st *Settlement) []byte {
	b := append(make([]byte, 0, 256), `{"key":`...)
	b = strconv.AppendQuote(b, st.Key)
	b = append(b, `,"receipt":"r`...)
	b = strconv.AppendUint(b, id, 10)
	b = append(b, `","lines":[{"account":`...)
	b = strconv.AppendQuote(b, st.Payer)
	b = append(b, `,"amount":"-`...)
	b = append(b, st.Price.String()...)
	b = append(b, `"}`...)
	for _, sh := range st.Shares {
		b = append(b, `,{"account":`...)
		b = strconv.AppendQuote(b, sh.To)
		b = append(b, `,"amount":"`...)
		b = append(b, sh.Amount.String()...)
		b = append(b, `"}`...)
	}
	b = append(b, `],"time":"`...)
	b = w.now.AppendFormat(b, time.RFC3339Nano)
	return append(b, `"}`...)
}

// Totals are what Check found.
type Totals struct {
	// Receipts and Entries are the rows written; Keys the idempotency keys.
	Receipts, Entries, Keys int
	// Sum is the sum of every balance (zero when the money adds up).
	Sum journal.Amount
	// Spent is the sum of the budgets' spent amounts.
	Spent journal.Amount
}

// Check counts the rows and sums the balances and budgets.
func (s *Store) Check() (Totals, error) {
	var t Totals
	err := s.db.View(func(tx *bolt.Tx) error {
		t.Receipts = tx.Bucket(bucketReceipts).Stats().KeyN
		t.Entries = tx.Bucket(bucketJournal).Stats().KeyN
		t.Keys = tx.Bucket(bucketKeys).Stats().KeyN
		if err := tx.Bucket(bucketBalances).ForEach(func(_, v []byte) error {
			t.Sum += journal.Amount(binary.BigEndian.Uint64(v))
			return nil
		}); err != nil {
			return err
		}
		return tx.Bucket(bucketBudgets).ForEach(func(_, v []byte) error {
			t.Spent += journal.Amount(binary.BigEndian.Uint64(v[8:]))
			return nil
		})
	})
	return t, err
}

// Close stops the writer (after what it holds) and closes the file.
func (s *Store) Close() error {
	close(s.quit)
	<-s.done
	return s.db.Close()
}

func balance(b *bolt.Bucket, account string) journal.Amount {
	v := b.Get([]byte(account))
	if len(v) != 8 {
		return 0
	}
	return journal.Amount(binary.BigEndian.Uint64(v))
}

func add(b *bolt.Bucket, account string, amount journal.Amount) error {
	return b.Put([]byte(account), u64(uint64(balance(b, account)+amount)))
}

func u64(n uint64) []byte { return binary.BigEndian.AppendUint64(make([]byte, 0, 8), n) }
