package appliance_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"

	"holon.dev/holon"
	"holon.dev/holon/journal"
)

// BenchmarkAPI_Accounts_Human is GET /v0/accounts with a human key on a
// gateway of 20,000 accounts: the human's answer is its own account.
func BenchmarkAPI_Accounts_Human(b *testing.B) {
	ta := newHostedApp(b)
	ann := ta.signup("ann")
	err := ta.app.Engine().Store().Update(context.Background(), func(tx holon.Tx) error {
		for i := range 20_000 {
			e, err := journal.Transfer(fmt.Sprintf("bench:%d", i), "external:demo-credit", fmt.Sprintf("acct%05d", i), journal.MustParseAmount("1.00"))
			if err != nil {
				return err
			}
			if _, err := tx.AppendEntry(e); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		accts := ann.human.must(http.StatusOK, "GET", "/v0/accounts", nil)["accounts"].([]any)
		if len(accts) != 1 || accts[0].(map[string]any)["balance"] != "5.00" {
			b.Fatalf("ann's accounts: %v", accts)
		}
	}
}
