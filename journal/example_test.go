package journal_test

import (
	"fmt"

	"holon.dev/holon/journal"
)

// A 0.035 EUR call by bob to lena's fork of an acme agent whose
// royalties.forks is 0.15 (gateway.md §7).
func ExampleSplit() {
	price := journal.MustParseAmount("0.035")
	chain := []journal.Upstream{{Account: "acme", Rate: journal.MustParseRate("0.15")}}
	shares, err := journal.Split(price, "lena", chain)
	if err != nil {
		fmt.Println(err)
		return
	}
	entry, err := journal.Settlement("settle:r4", "bob", shares)
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, l := range entry.Lines {
		fmt.Println(l.Account, l.Amount)
	}
	// Output:
	// bob -0.035
	// holon 0.0035
	// lena 0.026775
	// acme 0.004725
}
