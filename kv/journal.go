package kv

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"holon.dev/holon/journal"
)

// The journal's rules, as errors a caller can test with errors.Is.
var (
	// ErrDuplicateKey: an entry with this idempotency key is already journaled.
	ErrDuplicateKey = errors.New("journal: idempotency key already used")
	// ErrJournalRowExists: a journal row would be overwritten.
	ErrJournalRowExists = errors.New("journal: rows are never overwritten")
)

// JournalRow is one committed journal entry. Rows are hash-chained: Hash
// covers the entry and the hash of the row before, so a row altered or
// removed after the fact is detected by a verifier.
type JournalRow struct {
	Seq   uint64         `json:"seq"`
	Key   string         `json:"key"`
	Time  time.Time      `json:"time"`
	Lines []journal.Line `json:"lines"`
	Prev  string         `json:"prev"`
	Hash  string         `json:"hash"`
}

// Account is an account's standing: its balance (the sum of its journal
// lines) and what is held on it for calls in flight.
type Account struct {
	Balance journal.Amount `json:"balance"`
	Held    journal.Amount `json:"held"`
}

// UnmarshalJSON reads an account. Its balance, unlike an amount on the wire,
// may be negative (an external:* account always is), which
// journal.Amount's UnmarshalText refuses.
func (a *Account) UnmarshalJSON(b []byte) error {
	var w struct {
		Balance string         `json:"balance"`
		Held    journal.Amount `json:"held"`
	}
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	digits, neg := strings.CutPrefix(w.Balance, "-")
	bal, err := journal.ParseAmount(digits)
	if err != nil {
		return fmt.Errorf("balance %w", err)
	}
	if neg {
		bal = -bal
	}
	*a = Account{Balance: bal, Held: w.Held}
	return nil
}

// Available is the balance less what is held.
func (a Account) Available() journal.Amount { return a.Balance - a.Held }

var metaJournalHead = []byte("journal_head")

// RowHash is the hash of a journal row: SHA-256 over the previous hash and
// the row's key, time and lines, in a fixed encoding.
func RowHash(prev string, seq uint64, key string, t time.Time, lines []journal.Line) string {
	h := sha256.New()
	var n [8]byte
	binary.BigEndian.PutUint64(n[:], seq)
	h.Write([]byte(prev))
	h.Write(n[:])
	h.Write([]byte(key))
	h.Write([]byte{0})
	h.Write([]byte(t.UTC().Format(time.RFC3339Nano)))
	h.Write([]byte{0})
	for _, l := range lines {
		h.Write([]byte(l.Account))
		h.Write([]byte{0})
		binary.BigEndian.PutUint64(n[:], uint64(l.Amount))
		h.Write(n[:])
	}
	return hex.EncodeToString(h.Sum(nil))
}

// AppendEntry journals an entry: its lines must sum to zero and its key must
// be new. Balances move in the same transaction. It returns the row.
func (tx *Tx) AppendEntry(e journal.Entry) (JournalRow, error) {
	if err := e.Validate(); err != nil {
		return JournalRow{}, err
	}
	keys := tx.btx.Bucket(bucketJournalKeys)
	if keys.Get([]byte(e.Key)) != nil {
		return JournalRow{}, fmt.Errorf("entry %s: %w", e.Key, ErrDuplicateKey)
	}
	seq, err := tx.nextSeq(bucketJournal)
	if err != nil {
		return JournalRow{}, err
	}
	meta := tx.btx.Bucket(bucketMeta)
	prev := string(meta.Get(metaJournalHead))
	row := JournalRow{Seq: seq, Key: e.Key, Time: tx.now().UTC(), Lines: e.Lines, Prev: prev}
	row.Hash = RowHash(prev, seq, row.Key, row.Time, row.Lines)
	if err := tx.putJournalRow(row); err != nil {
		return JournalRow{}, err
	}
	if err := tx.putNew(keys, []byte(e.Key), u64(seq)); err != nil {
		return JournalRow{}, err
	}
	if err := tx.put(meta, metaJournalHead, []byte(row.Hash)); err != nil {
		return JournalRow{}, err
	}
	for _, l := range e.Lines {
		if err := tx.addBalance(l.Account, l.Amount); err != nil {
			return JournalRow{}, fmt.Errorf("entry %s: %w", e.Key, err)
		}
	}
	_, err = tx.AddCounter("journal_entries", 1)
	return row, err
}

// putJournalRow is the only write to the journal bucket: it refuses to
// overwrite a row. There is no delete.
func (tx *Tx) putJournalRow(row JournalRow) error {
	b := tx.bucket(bucketJournal)
	key := u64(row.Seq)
	if b.Get(key) != nil {
		return fmt.Errorf("row %d: %w", row.Seq, ErrJournalRowExists)
	}
	v, err := tx.encode(&row)
	if err != nil {
		return err
	}
	return tx.putNew(b, key, v)
}

func (tx *Tx) addBalance(account string, delta journal.Amount) error {
	a, err := tx.Account(account)
	if err != nil {
		return err
	}
	if a.Balance, err = a.Balance.Add(delta); err != nil {
		return fmt.Errorf("balance of %s: %w", account, err)
	}
	return tx.putAccount(account, a)
}

// Account returns an account's standing (zero for an account never seen).
func (tx *Tx) Account(name string) (Account, error) {
	if tx.cache != nil {
		return cachedGet(&tx.cache.accounts, name, func() (Account, error) { return tx.readAccount(name) })
	}
	return tx.readAccount(name)
}

func (tx *Tx) readAccount(name string) (Account, error) {
	var a Account
	if err := tx.getJSON(bucketAccounts, []byte(name), &a); err != nil && !errors.Is(err, ErrNotFound) {
		return a, err
	}
	return a, nil
}

func (tx *Tx) putAccount(name string, a Account) error {
	if tx.cache != nil {
		cachedPut(tx, &tx.cache.accounts, name, a)
		return nil
	}
	return tx.putJSON(bucketAccounts, []byte(name), a)
}

// AddHeld moves what is held on an account by delta (positive to hold,
// negative to release). A hold never goes below zero.
func (tx *Tx) AddHeld(account string, delta journal.Amount) error {
	a, err := tx.Account(account)
	if err != nil {
		return err
	}
	if a.Held, err = a.Held.Add(delta); err != nil {
		return err
	}
	if a.Held < 0 {
		return fmt.Errorf("release %s on %s: only %s is held", -delta, account, a.Held-delta)
	}
	return tx.putAccount(account, a)
}

// HasEntry reports whether an entry with this idempotency key is journaled.
func (tx *Tx) HasEntry(key string) bool {
	return tx.btx.Bucket(bucketJournalKeys).Get([]byte(key)) != nil
}

// EntryByKey returns the journal row with this idempotency key.
func (tx *Tx) EntryByKey(key string) (JournalRow, error) {
	seq := tx.btx.Bucket(bucketJournalKeys).Get([]byte(key))
	if seq == nil {
		return JournalRow{}, ErrNotFound
	}
	var row JournalRow
	err := tx.getJSON(bucketJournal, seq, &row)
	return row, err
}

// ForEachAccount calls fn for every account, in name order.
func (tx *Tx) ForEachAccount(fn func(name string, a Account) error) error {
	if err := tx.flush(); err != nil {
		return err
	}
	return tx.btx.Bucket(bucketAccounts).ForEach(func(k, v []byte) error {
		var a Account
		if err := decodeValue(v, &a); err != nil {
			return err
		}
		return fn(string(k), a)
	})
}

// ForEachEntry calls fn for every journal row from seq after (exclusive),
// oldest first, until fn returns false.
func (tx *Tx) ForEachEntry(after uint64, fn func(JournalRow) (bool, error)) error {
	c := tx.btx.Bucket(bucketJournal).Cursor()
	for k, v := c.Seek(u64(after + 1)); k != nil; k, v = c.Next() {
		var row JournalRow
		if err := json.Unmarshal(v, &row); err != nil {
			return err
		}
		more, err := fn(row)
		if err != nil || !more {
			return err
		}
	}
	return nil
}

// VerifyJournal checks the whole journal: every row sums to zero and is
// chained to the one before, keys are unique, and every balance is the sum
// of its lines. It reads every row: an offline check, never done at start-up.
func (tx *Tx) VerifyJournal() error {
	sums := map[string]journal.Amount{}
	keys := map[string]bool{}
	prev := ""
	var n uint64
	err := tx.ForEachEntry(0, func(row JournalRow) (bool, error) {
		n++
		if row.Seq != n {
			return false, fmt.Errorf("journal row %d missing (found %d)", n, row.Seq)
		}
		if err := (journal.Entry{Key: row.Key, Lines: row.Lines}).Validate(); err != nil {
			return false, fmt.Errorf("journal row %d: %w", row.Seq, err)
		}
		if keys[row.Key] {
			return false, fmt.Errorf("journal row %d: %w", row.Seq, ErrDuplicateKey)
		}
		keys[row.Key] = true
		if row.Prev != prev || RowHash(prev, row.Seq, row.Key, row.Time, row.Lines) != row.Hash {
			return false, fmt.Errorf("journal row %d: hash chain broken", row.Seq)
		}
		prev = row.Hash
		for _, l := range row.Lines {
			sums[l.Account] += l.Amount
		}
		return true, nil
	})
	if err != nil {
		return err
	}
	if head := tx.btx.Bucket(bucketMeta).Get(metaJournalHead); !bytes.Equal(head, []byte(prev)) {
		return fmt.Errorf("journal head %q does not match the last row %q", head, prev)
	}
	var total journal.Amount
	err = tx.ForEachAccount(func(name string, a Account) error {
		if a.Balance != sums[name] {
			return fmt.Errorf("account %s: balance %s, journal lines sum to %s", name, a.Balance, sums[name])
		}
		total += a.Balance
		delete(sums, name)
		return nil
	})
	if err != nil {
		return err
	}
	for name, s := range sums {
		if s != 0 {
			return fmt.Errorf("account %s has journal lines summing to %s but no balance", name, s)
		}
	}
	if total != 0 {
		return fmt.Errorf("balances sum to %s, want 0", total)
	}
	return nil
}
