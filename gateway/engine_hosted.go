package gateway

import (
	"encoding/json"

	"holon.dev/holon"
	"holon.dev/holon/gateway/contract"
	"holon.dev/holon/journal"
)

// PutMandateTx is PutMandate inside a caller's write transaction, so that
// a hosted gateway can store a mandate together with the records that go
// with it (a signup's account, keys and credit) in one commit. Like
// PutMandate, it replaces a mandate with the same id and gives the issuer
// the signup credit once.
func (e *Engine) PutMandateTx(tx holon.Tx, m *contract.Mandate) error {
	if err := m.Validate(); err != nil {
		return err
	}
	raw, err := json.Marshal(m)
	if err != nil {
		return err
	}
	d, err := tx.Mandate(m.ID)
	created := e.now().UTC()
	if err == nil {
		created = d.Created
	}
	if err := tx.PutMandate(m.ID, holon.Doc{Doc: raw, Created: created, Revoked: m.Revoked}); err != nil {
		return err
	}
	return e.grantSignupCredit(tx, m.Issuer)
}

// CreditTx is Credit inside a caller's write transaction: demo credit from
// external:demo-credit to an account, journaled under key (unique), so an
// operator's top-up and its moderation log entry commit together.
func (e *Engine) CreditTx(tx holon.Tx, key, account string, amount journal.Amount) (holon.JournalRow, error) {
	entry, err := journal.Transfer(key, DemoCreditAccount, account, amount)
	if err != nil {
		return holon.JournalRow{}, holon.Errorf(holon.CodeInvalidRequest, "%v", err)
	}
	return tx.AppendEntry(entry)
}

// SignupCredit is the demo credit each new account gets.
func (e *Engine) SignupCredit() journal.Amount { return e.credit }
