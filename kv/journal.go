package kv

import (
	"encoding/json"
	"errors"
	"fmt"

	"holon.dev/holon"
	"holon.dev/holon/journal"
)

// metaJournalHead records the head of the embedded store's chain, the
// journal's chain 0 (holon.JournalHeadKey).
var metaJournalHead = []byte(holon.JournalHeadKey(0))

// PostEntry journals an entry as AppendEntry does, without its row.
func (tx *Tx) PostEntry(e journal.Entry) error {
	_, err := tx.AppendEntry(e)
	return err
}

// AppendEntry journals an entry: its lines must sum to zero and its key must
// be new. Balances move in the same transaction. It returns the row.
func (tx *Tx) AppendEntry(e journal.Entry) (holon.JournalRow, error) {
	if err := e.Validate(); err != nil {
		return holon.JournalRow{}, err
	}
	keys := tx.bkt(bucketJournalKeys)
	if keys.Get([]byte(e.Key)) != nil {
		return holon.JournalRow{}, fmt.Errorf("entry %s: %w", e.Key, holon.ErrDuplicateKey)
	}
	seq, err := tx.nextSeq(bucketJournal)
	if err != nil {
		return holon.JournalRow{}, err
	}
	prev, err := tx.journalHead()
	if err != nil {
		return holon.JournalRow{}, err
	}
	row := holon.JournalRow{Seq: seq, Key: e.Key, Time: tx.now().UTC(), Lines: e.Lines, Prev: prev}
	row.Hash = journal.RowHash(prev, seq, row.Key, row.Time, row.Lines)
	if err := tx.putJournalRow(row); err != nil {
		return holon.JournalRow{}, err
	}
	if err := tx.putNew(keys, []byte(e.Key), u64(seq)); err != nil {
		return holon.JournalRow{}, err
	}
	if err := tx.setJournalHead(row.Hash); err != nil {
		return holon.JournalRow{}, err
	}
	for _, l := range e.Lines {
		if err := tx.addBalance(l.Account, l.Amount); err != nil {
			return holon.JournalRow{}, fmt.Errorf("entry %s: %w", e.Key, err)
		}
	}
	_, err = tx.AddCounter("journal_entries", 1)
	return row, err
}

// journalHead is the hash of the last journal row ("" for an empty
// journal), the write cache's in a write transaction.
func (tx *Tx) journalHead() (string, error) {
	read := func() (string, error) { return string(tx.bkt(bucketMeta).Get(metaJournalHead)), nil }
	if tx.cache != nil {
		return cachedGet(&tx.cache.meta, tx.cache.hot.meta, string(metaJournalHead), read)
	}
	return read()
}

// setJournalHead moves the journal's head (put once per transaction, by
// the write cache's flush).
func (tx *Tx) setJournalHead(hash string) error {
	if tx.cache != nil {
		cachedPut(tx, &tx.cache.meta, string(metaJournalHead), hash)
		return nil
	}
	return tx.put(tx.bkt(bucketMeta), metaJournalHead, []byte(hash))
}

// putJournalRow is the only write to the journal bucket: it refuses to
// overwrite a row. There is no delete.
func (tx *Tx) putJournalRow(row holon.JournalRow) error {
	b := tx.bucket(bucketJournal)
	key := u64(row.Seq)
	if b.Get(key) != nil {
		return fmt.Errorf("row %d: %w", row.Seq, holon.ErrJournalRowExists)
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
	before := a
	if a.Balance, err = a.Balance.Add(delta); err != nil {
		return fmt.Errorf("balance of %s: %w", account, err)
	}
	return tx.putAccount(account, before, a)
}

// Account returns an account's standing (zero for an account never seen).
func (tx *Tx) Account(name string) (holon.Account, error) {
	if tx.cache != nil {
		return cachedGet(&tx.cache.accounts, tx.cache.hot.accounts, name, func() (holon.Account, error) { return tx.readAccount(name) })
	}
	return tx.readAccount(name)
}

func (tx *Tx) readAccount(name string) (holon.Account, error) {
	var a holon.Account
	if err := tx.getJSON(bucketAccounts, []byte(name), &a); err != nil && !errors.Is(err, holon.ErrNotFound) {
		return a, err
	}
	return a, nil
}

// putAccount writes an account's new standing; before is what it was.
func (tx *Tx) putAccount(name string, before, a holon.Account) error {
	tx.overdrafts.Before(name, before)
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
	before := a
	if a.Held, err = a.Held.Add(delta); err != nil {
		return err
	}
	if a.Held < 0 {
		return fmt.Errorf("release %s on %s: only %s is held", -delta, account, a.Held-delta)
	}
	return tx.putAccount(account, before, a)
}

// HasEntry reports whether an entry with this idempotency key is journaled.
func (tx *Tx) HasEntry(key string) bool {
	return tx.bkt(bucketJournalKeys).Get([]byte(key)) != nil
}

// EntryByKey returns the journal row with this idempotency key.
func (tx *Tx) EntryByKey(key string) (holon.JournalRow, error) {
	seq := tx.bkt(bucketJournalKeys).Get([]byte(key))
	if seq == nil {
		return holon.JournalRow{}, holon.ErrNotFound
	}
	var row holon.JournalRow
	err := tx.getJSON(bucketJournal, seq, &row)
	return row, err
}

// ForEachAccount calls fn for every account, in name order.
func (tx *Tx) ForEachAccount(fn func(name string, a holon.Account) error) error {
	if err := tx.flush(); err != nil {
		return err
	}
	return tx.forEach(bucketAccounts, func(k, v []byte) error {
		var a holon.Account
		if err := decodeValue(v, &a); err != nil {
			return err
		}
		return fn(string(k), a)
	})
}

// ForEachEntry calls fn for every journal row from seq after (exclusive),
// oldest first, until fn returns false.
func (tx *Tx) ForEachEntry(after uint64, fn func(holon.JournalRow) (bool, error)) error {
	c := tx.bkt(bucketJournal).Cursor()
	for k, v := c.Seek(u64(after + 1)); k != nil; k, v = c.Next() {
		var row holon.JournalRow
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

// VerifyJournal checks the whole journal: every row sums to zero and
// starts or extends a chain, keys are unique, the recorded heads are the
// chains' last rows, and every balance is the sum of its lines. It reads
// every row: an offline check, never done at start-up.
func (tx *Tx) VerifyJournal() error {
	return holon.VerifyJournal(tx, func(heads []string) error {
		return holon.MatchHeads(tx.JournalHeads(), heads)
	})
}
