package accounts

import (
	"errors"
	"fmt"
	"maps"
	"slices"

	"holon.dev/holon"
	"holon.dev/holon/gateway/contract"
	"holon.dev/holon/journal"
)

// Currency is the currency of every hosted mandate.
const Currency = "EUR"

// MaxMandates bounds the root mandates of an account.
const MaxMandates = 100

// StarterMandate is a new account's <handle>/sandbox: a small budget to
// try the shipped agents with, approval above 0.50.
func (r *Repo) StarterMandate(handle string) *contract.Mandate {
	amount := func(s string) *journal.Amount { a := journal.MustParseAmount(s); return &a }
	depth := 1
	allow := r.starterAllow
	if len(allow) == 0 {
		allow = []string{"holon-labs/*"}
	}
	return &contract.Mandate{
		ID:         handle + "/sandbox",
		Issuer:     handle,
		Grantee:    handle + "/assistant",
		Currency:   Currency,
		Budget:     contract.Budget{Total: amount("5.00"), PerCall: amount("1.00")},
		Approval:   &contract.Approval{Above: amount("0.50")},
		Allow:      contract.Allow{Agents: slices.Clone(allow), Capabilities: []string{"*"}},
		FX:         r.PlatformFX(),
		Delegation: &contract.Delegation{MaxDepth: &depth},
	}
}

// PlatformFX is the fx of a hosted mandate: the platform's rates, never
// the caller's.
func (r *Repo) PlatformFX() map[string]journal.Rate {
	fx := maps.Clone(r.fx)
	delete(fx, Currency)
	if len(fx) == 0 {
		return nil
	}
	return fx
}

// Mandates lists an account's root mandates, oldest first.
func (r *Repo) Mandates(handle string) ([]string, error) {
	var acct *Account
	err := r.store.View(func(tx holon.Tx) error { var err error; acct, err = Get(tx, handle); return err })
	if err != nil {
		return nil, fmt.Errorf("account %s: %w", handle, err)
	}
	return acct.Mandates, nil
}

// HasMandate reports whether id is one of the account's root mandates.
func (a *Account) HasMandate(id string) bool { return slices.Contains(a.Mandates, id) }

// AddMandate stores a new root mandate of handle's, refusing an id taken
// and an account that holds MaxMandates already.
func (r *Repo) AddMandate(tx holon.Tx, handle string, m *contract.Mandate) error {
	acct, err := Get(tx, handle)
	if err != nil {
		return err
	}
	if _, err := tx.Mandate(m.ID); err == nil {
		return holon.Errorf(CodeMandateExists, "%s exists already: pick another name", m.ID)
	} else if !errors.Is(err, holon.ErrNotFound) {
		return err
	}
	if len(acct.Mandates) >= MaxMandates {
		return holon.Errorf(CodeLimitReached, "an account holds at most %d mandates", MaxMandates)
	}
	acct.Mandates = append(acct.Mandates, m.ID)
	if err := Put(tx, acct); err != nil {
		return err
	}
	return r.engine.PutMandateTx(tx, m)
}
