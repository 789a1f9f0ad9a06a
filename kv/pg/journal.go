package pg

import (
	"errors"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"holon.dev/holon"
	"holon.dev/holon/journal"
)

// The journal's rules hold twice: the store checks an entry before it
// writes it (sums to zero, key new), and the tables refuse what breaks
// them anyway (deferred triggers, append-only triggers, a unique key).

// AppendEntry journals an entry and moves its accounts' balances.
func (t *Tx) AppendEntry(e journal.Entry) (holon.JournalRow, error) { return t.appendEntry(e) }

// PostEntry is AppendEntry without the row: what it reads, the update
// does not see, so that a group run while its writer waits for the
// writers' lock can number and chain its entries again after another
// gateway's (spec.go).
func (t *Tx) PostEntry(e journal.Entry) error {
	defer t.inside()()
	_, err := t.appendEntry(e)
	return err
}

func (t *Tx) appendEntry(e journal.Entry) (holon.JournalRow, error) {
	if err := t.writable(); err != nil {
		return holon.JournalRow{}, err
	}
	if err := e.Validate(); err != nil {
		return holon.JournalRow{}, err
	}
	// A key the writer knows is used is refused at once; any other is
	// refused by the table's unique key when the entry reaches it, which
	// fails the update (no round trip waits for the answer).
	if c, ok := t.cached(kEntry(e.Key)); ok && c.st == present {
		return holon.JournalRow{}, fmt.Errorf("entry %s: %w", e.Key, holon.ErrDuplicateKey)
	}
	seq, err := t.nextSeq("journal")
	if err != nil {
		return holon.JournalRow{}, err
	}
	prev, _ := t.meta(t.s.headKey)
	row := holon.JournalRow{Seq: seq, Key: e.Key, Time: t.Now().UTC(), Lines: e.Lines, Prev: prev}
	row.Hash = journal.RowHash(prev, seq, row.Key, row.Time, row.Lines)
	if err := t.appendRows("", rowEntry, func(err error) error {
		var pe *pgconn.PgError
		if errors.As(err, &pe) && pe.Code == "23505" && pe.ConstraintName == "journal_entries_key_key" {
			return fmt.Errorf("entry %s: %w: %w", e.Key, holon.ErrDuplicateKey, err)
		}
		return err
	}, []any{int64(seq), row.Key, ts(row.Time), row.Prev, row.Hash}); err != nil {
		return holon.JournalRow{}, err
	}
	accounts := make([]string, len(e.Lines))
	for i, l := range e.Lines {
		accounts[i] = l.Account
	}
	// The accounts get their new balances, hot rows (rows.go): those the
	// writer does not know are read first, together, in one round trip.
	if err := t.knowAccounts(accounts); err != nil {
		return holon.JournalRow{}, err
	}
	moved := map[string]journal.Amount{}
	for _, l := range e.Lines {
		moved[l.Account] += l.Amount
	}
	for _, l := range e.Lines {
		name := l.Account
		d, first := moved[name]
		if !first {
			continue // an account named twice: done at its first line
		}
		delete(moved, name)
		a, err := t.Account(name) // known now: no round trip
		if err != nil {
			return holon.JournalRow{}, err
		}
		t.overdrafts.Before(name, a)
		a.Balance += d
		if err := t.writeRow(kAccount(name), rowAccountMove, name, d.Micros(), int64(0)); err != nil {
			return holon.JournalRow{}, err
		}
		t.wrote(kAccount(name), a)
	}
	lines := make([][]any, len(e.Lines))
	for i, l := range e.Lines {
		lines[i] = []any{int64(seq), int64(i + 1), l.Account, l.Amount.Micros()}
	}
	if err := t.appendRows("", rowLine, nil, lines...); err != nil {
		return holon.JournalRow{}, err
	}
	t.wrote(kEntry(e.Key), true)
	if err := t.putMeta(t.s.headKey, row.Hash); err != nil {
		return holon.JournalRow{}, err
	}
	_, err = t.AddCounter("journal_entries", 1)
	return row, err
}

// checkOverdrafts refuses the update when it leaves an account
// overdrawn, from what the writer knows (the accounts it changed are
// known: no round trip), without the update seeing them (spec.go); the
// database checks the same from its rows (migration 18).
func (t *Tx) checkOverdrafts() error {
	defer t.inside()()
	return t.overdrafts.Check(t.Account)
}

// knowAccounts reads the accounts among names the writer does not know,
// in one round trip, into its cache.
func (t *Tx) knowAccounts(names []string) error {
	var unknown []string
	for _, name := range names {
		if _, ok := t.cached(kAccount(name)); !ok && !slices.Contains(unknown, name) {
			unknown = append(unknown, name)
		}
	}
	if len(unknown) == 0 {
		return nil
	}
	found := map[string]holon.Account{}
	err := t.all(accountsSelect, []any{unknown}, func(rows pgx.Rows) error {
		var name string
		var bal, held int64
		if err := rows.Scan(&name, &bal, &held); err != nil {
			return err
		}
		found[name] = holon.Account{Balance: journal.Amount(bal), Held: journal.Amount(held)}
		return nil
	})
	if err != nil {
		return err
	}
	for _, name := range unknown {
		if a, ok := found[name]; ok {
			t.read(kAccount(name), a)
		} else {
			t.readAbsent(kAccount(name))
		}
	}
	return nil
}

// HasEntry reports whether an entry with this key is journaled.
func (t *Tx) HasEntry(key string) bool {
	k := kEntry(key)
	if c, ok := t.cached(k); ok {
		return c.st == present
	}
	var ok bool
	if t.one(`SELECT EXISTS (SELECT 1 FROM journal_entries WHERE key = $1)`, []any{key}, &ok) == nil {
		if ok {
			t.read(k, true)
		} else {
			t.readAbsent(k)
		}
	}
	return ok
}

// entryQuery reads journal rows with their lines, in sequence order.
const entryQuery = `SELECT e.seq, e.key, e.time, e.prev, e.hash,
		array_agg(l.account ORDER BY l.position), array_agg((l.amount * 1000000)::bigint ORDER BY l.position)
	FROM journal_entries e JOIN journal_lines l ON l.entry = e.seq `

func scanEntry(rows pgx.Rows) (holon.JournalRow, error) {
	var row holon.JournalRow
	var seq int64
	var at string
	var accounts []string
	var amounts []int64
	if err := rows.Scan(&seq, &row.Key, &at, &row.Prev, &row.Hash, &accounts, &amounts); err != nil {
		return row, err
	}
	row.Seq = uint64(seq)
	var err error
	if row.Time, err = parseTime(at); err != nil {
		return row, err
	}
	row.Lines = make([]journal.Line, len(accounts))
	for i := range accounts {
		row.Lines[i] = journal.Line{Account: accounts[i], Amount: journal.Amount(amounts[i])}
	}
	return row, nil
}

// EntryByKey reads the row of the entry with this key.
func (t *Tx) EntryByKey(key string) (holon.JournalRow, error) {
	var out []holon.JournalRow
	err := t.all(entryQuery+`WHERE e.key = $1 GROUP BY e.seq`, []any{key}, func(rows pgx.Rows) error {
		row, err := scanEntry(rows)
		out = append(out, row)
		return err
	})
	if err != nil {
		return holon.JournalRow{}, err
	}
	if len(out) == 0 {
		return holon.JournalRow{}, holon.ErrNotFound
	}
	return out[0], nil
}

// ForEachEntry calls fn for every row after sequence number after, in
// order, a page at a time.
func (t *Tx) ForEachEntry(after uint64, fn func(holon.JournalRow) (bool, error)) error {
	for {
		var page []holon.JournalRow
		err := t.all(entryQuery+`WHERE e.seq > $1 GROUP BY e.seq ORDER BY e.seq LIMIT $2`, []any{int64(after), pageSize}, func(rows pgx.Rows) error {
			row, err := scanEntry(rows)
			page = append(page, row)
			return err
		})
		if err != nil {
			return err
		}
		for _, row := range page {
			more, err := fn(row)
			if err != nil || !more {
				return err
			}
			after = row.Seq
		}
		if len(page) < pageSize {
			return nil
		}
	}
}

// Account reads an account (zero when it never moved).
func (t *Tx) Account(name string) (holon.Account, error) {
	k := kAccount(name)
	if c, ok := t.cached(k); ok {
		if c.st == present {
			return c.v.(holon.Account), nil
		}
		return holon.Account{}, nil
	}
	if slices.Contains(t.ahead.accounts, name) {
		// The rows asked for ahead, in this round trip.
		if err := t.sendAhead(); err != nil {
			return holon.Account{}, err
		}
		return t.Account(name)
	}
	var bal, held int64
	err := t.one(`SELECT (sum(balance) * 1000000)::bigint, (sum(held) * 1000000)::bigint FROM accounts WHERE name = $1 GROUP BY name`,
		[]any{name}, &bal, &held)
	if err == holon.ErrNotFound {
		t.readAbsent(k)
		return holon.Account{}, nil
	}
	a := holon.Account{Balance: journal.Amount(bal), Held: journal.Amount(held)}
	if err == nil {
		t.read(k, a)
	}
	return a, err
}

// ForEachAccount calls fn for every account, in name order.
func (t *Tx) ForEachAccount(fn func(name string, a holon.Account) error) error {
	after := ""
	for first := true; ; first = false {
		type acct struct {
			name string
			a    holon.Account
		}
		var page []acct
		err := t.all(`SELECT name, (sum(balance) * 1000000)::bigint, (sum(held) * 1000000)::bigint FROM accounts
			WHERE $1 OR name > $2 COLLATE "C" GROUP BY name ORDER BY name COLLATE "C" LIMIT $3`, []any{first, after, pageSize}, func(rows pgx.Rows) error {
			var x acct
			var bal, held int64
			err := rows.Scan(&x.name, &bal, &held)
			x.a = holon.Account{Balance: journal.Amount(bal), Held: journal.Amount(held)}
			page = append(page, x)
			return err
		})
		if err != nil {
			return err
		}
		for _, x := range page {
			if err := fn(x.name, x.a); err != nil {
				return err
			}
			after = x.name
		}
		if len(page) < pageSize {
			return nil
		}
	}
}

// AddHeld moves what is held on an account; it never goes below zero.
func (t *Tx) AddHeld(account string, delta journal.Amount) error {
	defer t.inside()()
	a, err := t.Account(account)
	if err != nil {
		return err
	}
	held, err := a.Held.Add(delta)
	if err != nil {
		return err
	}
	if held < 0 {
		return judged(fmt.Errorf("release %s on %s: only %s is held", -delta, account, a.Held))
	}
	t.overdrafts.Before(account, a)
	a.Held = held
	if err := t.writeRow(kAccount(account), rowAccountMove, account, int64(0), delta.Micros()); err != nil {
		return err
	}
	t.wrote(kAccount(account), a)
	return nil
}

// VerifyJournal checks the journal's rules and that the recorded heads
// are the last rows of the journal's chains, one a gateway.
func (t *Tx) VerifyJournal() error {
	return holon.VerifyJournal(t, func(found []string) error {
		heads, err := t.JournalHeads()
		if err != nil {
			return err
		}
		return holon.MatchHeads(heads, found)
	})
}

// JournalHeads are the heads the journal's chains recorded (meta rows
// under holon.JournalHeadKey), sorted.
func (t *Tx) JournalHeads() ([]string, error) {
	var heads []string
	err := t.all(`SELECT key, value FROM meta WHERE key = $1 OR key LIKE $2 ORDER BY value`, []any{holon.JournalHeadKey(0), holon.JournalHeadsFrom + "%"}, func(rows pgx.Rows) error {
		var k, v string
		if err := rows.Scan(&k, &v); err != nil {
			return err
		}
		if holon.IsJournalHeadKey(k) && v != "" {
			heads = append(heads, v)
		}
		return nil
	})
	slices.Sort(heads)
	return heads, err
}
