package holon_test

import (
	"testing"

	"holon.dev/holon"
	"holon.dev/holon/journal"
)

// Ensure that Budget.Add moves spent and reserved and refuses, changing
// nothing, a move that would leave either below zero.
func TestBudget_Add(t *testing.T) {
	b := holon.Budget{}
	if err := b.Add(0, 300_000); err != nil {
		t.Fatal(err)
	}
	if err := b.Add(120_000, -300_000); err != nil {
		t.Fatal(err)
	}
	want := holon.Budget{Spent: 120_000}
	if b != want {
		t.Fatalf("budget %+v, want %+v", b, want)
	}
	for _, m := range [][2]journal.Amount{{-120_001, 0}, {0, -1}} {
		if err := b.Add(m[0], m[1]); err == nil {
			t.Errorf("Add(%v, %v) left %+v: want a refusal", m[0], m[1], b)
		}
	}
	if b != want {
		t.Fatalf("a refused move changed the budget: %+v", b)
	}
}
