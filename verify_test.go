package holon_test

import (
	"strings"
	"testing"
	"time"

	"holon.dev/holon"
	"holon.dev/holon/journal"
)

// chainRow is row seq with key, extending prev ("" starts a chain).
func chainRow(seq uint64, key, prev string) holon.JournalRow {
	lines := []journal.Line{{Account: "a", Amount: -1}, {Account: "b", Amount: 1}}
	at := time.Date(2026, 12, 7, 0, 0, int(seq), 0, time.UTC)
	return holon.JournalRow{Seq: seq, Key: key, Time: at, Lines: lines, Prev: prev, Hash: journal.RowHash(prev, seq, key, at, lines)}
}

// interleaved is two chains whose rows alternate: 1 → 3 → 5 and 2 → 4.
func interleaved() []holon.JournalRow {
	r1 := chainRow(1, "k1", "")
	r2 := chainRow(2, "k2", "")
	r3 := chainRow(3, "k3", r1.Hash)
	r4 := chainRow(4, "k4", r2.Hash)
	r5 := chainRow(5, "k5", r3.Hash)
	return []holon.JournalRow{r1, r2, r3, r4, r5}
}

// Ensure that Chains follows several chains whose rows interleave, and
// ends with their heads; and that each way of breaking them is caught,
// in the row or in the heads: a row altered, a row removed from a
// chain's middle or end, a second row following one, a row added as a
// chain of its own.
func TestChains(t *testing.T) {
	follow := func(rows []holon.JournalRow) ([]string, error) {
		var c holon.Chains
		for _, r := range rows {
			if err := c.Add(r); err != nil {
				return nil, err
			}
		}
		return c.Heads(), nil
	}
	rows := interleaved()
	recorded := []string{rows[3].Hash, rows[4].Hash}
	if recorded[0] > recorded[1] {
		recorded[0], recorded[1] = recorded[1], recorded[0]
	}
	heads, err := follow(rows)
	if err != nil {
		t.Fatal(err)
	}
	if err := holon.MatchHeads(recorded, heads); err != nil {
		t.Fatalf("two interleaved chains: %v", err)
	}

	altered := interleaved()
	altered[2].Lines = []journal.Line{{Account: "a", Amount: -2}, {Account: "b", Amount: 2}}
	fork := interleaved()
	fork[4] = chainRow(5, "k5", fork[0].Hash) // follows row 1, as row 3 does
	for _, tt := range []struct {
		name string
		rows []holon.JournalRow
		want string // in Add's error, or in MatchHeads' when Add passes
	}{
		{"a row altered", altered, "journal row 3: hash chain broken: its content does not match its hash"},
		{"a chain's middle row removed", []holon.JournalRow{rows[0], rows[1], rows[3], rows[4]}, "journal row 5: hash chain broken: its prev hash"},
		{"a chain's last row removed", rows[:4], "recorded heads " + rows[4].Hash[:16] + "… end no chain"},
		{"two rows follow one", fork, "journal row 5: hash chain broken"},
		{"a row added as a chain of its own", append(interleaved(), chainRow(6, "k6", "")), "end chains no recorded head names"},
		{"a row altered, rehashed, its chain ended there", []holon.JournalRow{rows[0], rows[1], rows[2], rows[3], chainRow(5, "k5x", rows[2].Hash)}, "recorded heads " + rows[4].Hash[:16]},
	} {
		t.Run(tt.name, func(t *testing.T) {
			heads, err := follow(tt.rows)
			if err == nil {
				err = holon.MatchHeads(recorded, heads)
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("got %v, want an error mentioning %q", err, tt.want)
			}
		})
	}
}

// rowsTx is a JournalTx of given rows and the balances they leave.
type rowsTx struct {
	holon.JournalTx
	rows []holon.JournalRow
}

func (r rowsTx) ForEachEntry(after uint64, fn func(holon.JournalRow) (bool, error)) error {
	for _, row := range r.rows {
		if row.Seq <= after {
			continue
		}
		if more, err := fn(row); err != nil || !more {
			return err
		}
	}
	return nil
}

func (r rowsTx) ForEachAccount(fn func(string, holon.Account) error) error {
	sums := map[string]journal.Amount{}
	for _, row := range r.rows {
		for _, l := range row.Lines {
			sums[l.Account] += l.Amount
		}
	}
	for _, name := range []string{"a", "b"} {
		if err := fn(name, holon.Account{Balance: sums[name]}); err != nil {
			return err
		}
	}
	return nil
}

// Ensure that VerifyJournal takes numbers that skip (a store on
// PostgreSQL hands them out from blocks, and skips what it did not use),
// while a row removed still shows in its chain or at its head, and rows
// out of the order of their numbers are refused.
func TestVerifyJournal_NumbersSkip(t *testing.T) {
	r3 := chainRow(3, "k3", "")
	r9 := chainRow(9, "k9", "")
	r10 := chainRow(10, "k10", r3.Hash)
	r40 := chainRow(40, "k40", r10.Hash)
	rows := []holon.JournalRow{r3, r9, r10, r40}
	heads := func(recorded ...string) func([]string) error {
		if recorded[0] > recorded[1] {
			recorded[0], recorded[1] = recorded[1], recorded[0]
		}
		return func(found []string) error { return holon.MatchHeads(recorded, found) }
	}
	if err := holon.VerifyJournal(rowsTx{rows: rows}, heads(r9.Hash, r40.Hash)); err != nil {
		t.Fatalf("numbers 3, 9, 10, 40 in two whole chains: %v", err)
	}
	for _, tt := range []struct {
		name string
		rows []holon.JournalRow
		want string
	}{
		{"a chain's middle row removed", []holon.JournalRow{r3, r9, r40}, "journal row 40: hash chain broken"},
		{"a chain's last row removed", []holon.JournalRow{r3, r9, r10}, "end no chain of rows"},
		{"a chain of one row removed", []holon.JournalRow{r3, r10, r40}, "end no chain of rows"},
		{"rows out of the order of their numbers", []holon.JournalRow{r3, r10, r9, r40}, "journal row 9 comes after row 10"},
		{"a number used twice", []holon.JournalRow{r3, r9, chainRow(9, "k9b", r3.Hash), r40}, "journal row 9 comes after row 9"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := holon.VerifyJournal(rowsTx{rows: tt.rows}, heads(r9.Hash, r40.Hash))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("got %v, want an error mentioning %q", err, tt.want)
			}
		})
	}
}
