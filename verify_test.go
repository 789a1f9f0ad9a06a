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
