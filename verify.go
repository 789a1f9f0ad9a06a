package holon

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"holon.dev/holon/journal"
)

// A journal is a forest of hash chains: each writer (the embedded store's
// one, or each gateway's on a shared database) extends a chain of its own,
// whose first row has no prev and each later row the hash of the chain's
// row before. Rows are numbered in one sequence across the chains. A
// store records each chain's last hash, its head; the heads together
// cover every row, since a row removed or altered breaks the link to the
// row after it or, at a chain's end, no longer matches its head.

// Chains follows a journal's chains, its rows given in seq order: each
// row must start a chain or extend one, and no row may be extended twice.
type Chains struct {
	heads map[string]bool // hashes no row extends yet
	n     int
}

// Add checks row's place in the chains: its hash is its content's, and
// its prev is "" (a new chain) or the hash of a row before it that no
// other row extends.
func (c *Chains) Add(row JournalRow) error {
	if c.heads == nil {
		c.heads = map[string]bool{}
	}
	if journal.RowHash(row.Prev, row.Seq, row.Key, row.Time, row.Lines) != row.Hash {
		return fmt.Errorf("journal row %d: hash chain broken: its content does not match its hash: the row was altered (key %s)", row.Seq, row.Key)
	}
	if row.Prev != "" {
		if !c.heads[row.Prev] {
			return fmt.Errorf("journal row %d: hash chain broken: its prev hash %.16s… is not the hash of a row before it that no other row follows: a row before it was altered or removed, or two rows follow one", row.Seq, row.Prev)
		}
		delete(c.heads, row.Prev)
	}
	if c.heads[row.Hash] {
		return fmt.Errorf("journal row %d: hash chain broken: its hash is another row's", row.Seq)
	}
	c.heads[row.Hash] = true
	c.n++
	return nil
}

// Heads are the chains' last hashes, sorted.
func (c *Chains) Heads() []string {
	out := make([]string, 0, len(c.heads))
	for h := range c.heads {
		out = append(out, h)
	}
	slices.Sort(out)
	return out
}

// MatchHeads compares the heads a store recorded with those its rows end
// in (both sorted, "" left out).
func MatchHeads(recorded, found []string) error {
	if slices.Equal(recorded, found) {
		return nil
	}
	missing, extra := diff(recorded, found), diff(found, recorded)
	var why []string
	if len(missing) > 0 {
		why = append(why, fmt.Sprintf("recorded heads %s end no chain of rows: rows at a chain's end were removed or altered", short(missing)))
	}
	if len(extra) > 0 {
		why = append(why, fmt.Sprintf("rows %s end chains no recorded head names: rows were added, or a chain's head was removed", short(extra)))
	}
	return fmt.Errorf("journal heads: %s", strings.Join(why, "; "))
}

// diff is what a holds that b does not (both sorted).
func diff(a, b []string) []string {
	var out []string
	for _, x := range a {
		if _, ok := slices.BinarySearch(b, x); !ok {
			out = append(out, x)
		}
	}
	return out
}

func short(hs []string) string {
	s := make([]string, len(hs))
	for i, h := range hs {
		if len(h) > 16 {
			h = h[:16] + "…"
		}
		s[i] = h
	}
	return strings.Join(s, ", ")
}

// VerifyJournal checks the journal's rules on everything a store holds:
// rows in the order of their numbers, each entry summing to zero with a
// key used once, each row starting a hash chain or extending one (never
// one extended twice), every account's balance the sum of its lines, and
// all balances summing to zero. Numbers may skip (a store on PostgreSQL
// hands them out from blocks, and skips what it took but did not use):
// a row removed breaks the link of the row after it in its chain, or,
// at a chain's end, no longer matches the chain's recorded head. A store that records its chains' heads
// passes checkHeads, called with the heads the rows end in, sorted, once
// the rows are read (nil otherwise); MatchHeads compares them.
func VerifyJournal(tx JournalTx, checkHeads func(heads []string) error) error {
	var chains Chains
	sums := map[string]journal.Amount{}
	keys := map[string]bool{}
	var last uint64
	err := tx.ForEachEntry(0, func(row JournalRow) (bool, error) {
		if row.Seq <= last {
			return false, fmt.Errorf("journal row %d comes after row %d: rows are not in the order of their numbers", row.Seq, last)
		}
		last = row.Seq
		if err := (journal.Entry{Key: row.Key, Lines: row.Lines}).Validate(); err != nil {
			return false, fmt.Errorf("journal row %d: %w", row.Seq, err)
		}
		if keys[row.Key] {
			return false, fmt.Errorf("journal row %d: %w", row.Seq, ErrDuplicateKey)
		}
		keys[row.Key] = true
		if err := chains.Add(row); err != nil {
			return false, err
		}
		for _, l := range row.Lines {
			sums[l.Account] += l.Amount
		}
		return true, nil
	})
	if err != nil {
		return err
	}
	if checkHeads != nil {
		if err := checkHeads(chains.Heads()); err != nil {
			return err
		}
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

// JournalHeadKey names where a store records the head of its journal's
// chain n: "journal_head" for chain 0 (the embedded store's, and the first
// gateway's on a shared database), JournalHeadsFrom+"n" for the others.
func JournalHeadKey(n int) string {
	if n == 0 {
		return "journal_head"
	}
	return JournalHeadsFrom + strconv.Itoa(n)
}

// JournalHeadsFrom begins the keys of the chains after the first.
const JournalHeadsFrom = "journal_head:"

// IsJournalHeadKey reports whether a store's meta key records a chain's
// head (JournalHeadKey).
func IsJournalHeadKey(k string) bool {
	if k == "journal_head" {
		return true
	}
	n, ok := strings.CutPrefix(k, JournalHeadsFrom)
	if !ok {
		return false
	}
	i, err := strconv.Atoi(n)
	return err == nil && i > 0 && strconv.Itoa(i) == n
}
