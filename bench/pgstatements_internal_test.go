package bench

import (
	"strings"
	"testing"
	"time"
)

// Ensure that the statements' note counts the client's statements alone
// in its totals (a trigger's statements are inside the one that fired
// it), planning apart from executing, lists the largest (the two
// together) first, marks those run inside another, and divides by the
// calls answered.
func TestStmtStats_Note(t *testing.T) {
	s := stmtStats{
		{"INSERT INTO journal_lines (entry, position, account, amount) SELECT e, p", true}: {calls: 10, exec: 300 * time.Microsecond},
		{"SELECT a.entry FROM added", false}:                                               {calls: 10, exec: 100 * time.Microsecond},
		{"INSERT INTO receipts AS r (id)", true}:                                           {calls: 10, exec: 150 * time.Microsecond, plans: 5, plan: 200 * time.Microsecond},
	}
	got := s.note(100, 2)
	want := "the statements on the server (pg_stat_statements): 4.5 µs executing and 2.0 µs planning per call answered in the row's blocks, 0.20 statements a call of which 0.05 planned; " +
		"the largest: INSERT INTO receipts AS r (id) 1.5 µs + 2.0 µs planning (0.10 a call, planned 0.05 a call); INSERT INTO journal_lines (entry, position, account, amount) SELECT… 3.0 µs + 0.0 µs planning (0.10 a call, planned 0.00 a call)"
	if got != want {
		t.Errorf("note:\n got %s\nwant %s", got, want)
	}
	if got := s.note(100, 3); !strings.HasSuffix(got, "SELECT a.entry FROM added 1.0 µs + 0.0 µs planning (0.10 a call, planned 0.00 a call, inside another)") {
		t.Errorf("the statement inside another: %s", got)
	}
}
