package wire

import (
	"bytes"
	"encoding/json"
	"holon.dev/holon"
	"holon.dev/holon/gateway"
	"holon.dev/holon/gateway/contract"
	"holon.dev/holon/journal"
	"strings"
	"time"
)

// AppendJSON appends the answer as encoding/json's Encoder writes it with
// HTML left unescaped (web.JSON: a newline after it), by hand for the
// answer of most calls, a settled receipt and its output: ok is false
// (and b as it was) for one only encoding/json writes, with an approval,
// an error or alerts, or a receipt whose strings encoding/json would
// escape otherwise here (<, > or &).
func (a CallAnswer) AppendJSON(b []byte) (_ []byte, ok bool) {
	if a.Approval != nil || a.Error != nil || a.Alerts != nil || a.Receipt == nil {
		return b, false
	}
	start := len(b)
	out := bytes.NewBuffer(append(b, `{"output":`...))
	if a.Output == nil {
		out.WriteString("null")
	} else if err := json.Compact(out, a.Output); err != nil {
		return b[:start], false
	}
	b = append(out.Bytes(), `,"receipt":`...)
	at := len(b)
	b, err := a.Receipt.AppendJSON(b)
	if err != nil || bytes.Contains(b[at:], []byte(`\u003c`)) || bytes.Contains(b[at:], []byte(`\u003e`)) || bytes.Contains(b[at:], []byte(`\u0026`)) {
		return b[:start], false
	}
	if a.Replayed {
		b = append(b, `,"replayed":true`...)
	}
	return append(b, "}\n"...), true
}

// CallAnswer is the answer of POST /v0/calls and of approve-and-run.
type CallAnswer struct {
	Output   json.RawMessage `json:"output"`
	Receipt  *holon.Receipt  `json:"receipt"`
	Approval *holon.Approval `json:"approval,omitempty"`
	Error    *holon.Error    `json:"error,omitempty"`
	// Replayed is set on the answer to a call re-sent with an
	// Idempotency-Key already used: nothing ran again.
	Replayed bool `json:"replayed,omitempty"`
	// Alerts are the budget thresholds this call's cost made its mandate
	// (or a delegating call's) reach, as call_agent tells the assistant.
	Alerts []*holon.Alert `json:"alerts,omitempty"`
}

// AccountView is an account's balance: signed (an external account's is
// negative), what is held, and what is available.
type AccountView struct {
	Account   string `json:"account"`
	Balance   Money  `json:"balance"`
	Held      Money  `json:"held"`
	Available Money  `json:"available"`
}

// Agent is one agent in a listing.
type Agent struct {
	ID           string           `json:"id"`
	Version      string           `json:"version"`
	Summary      string           `json:"summary"`
	Capabilities []string         `json:"capabilities"`
	License      string           `json:"license"`
	Pricing      contract.Pricing `json:"pricing"`
	// WorstCase is in the agent's currency, or the mandate's when listed
	// under one (Currency says which).
	WorstCase journal.Amount `json:"worst_case"`
	Currency  string         `json:"currency"`
	Record    AgentRecord    `json:"record"`
	Denied    *holon.Error   `json:"denied,omitempty"`
	// Proprietary labels an agent with no code to check (manifest.md §8).
	Proprietary bool `json:"proprietary,omitempty"`
}

// AgentRecord is an agent's runs in a listing.
type AgentRecord struct {
	Runs      int64 `json:"runs"`
	Succeeded int64 `json:"succeeded"`
}

// AgentDetail is GET /v0/agents/{ns}/{name}[@range].
type AgentDetail struct {
	Manifest *contract.Manifest `json:"manifest"`
	Record   holon.Record       `json:"record"`
	Versions []string           `json:"versions"`
}

// ReceiptPage is a page of GET /v0/receipts. Scanned says how many
// receipts a filtered page read.
type ReceiptPage struct {
	Receipts []*holon.Receipt `json:"receipts"`
	Next     string           `json:"next"`
	Scanned  int              `json:"scanned,omitempty"`
}

// Me is GET /v0/me.
type Me struct {
	Kind     string                  `json:"kind"`
	Handle   string                  `json:"handle"`
	Email    string                  `json:"email,omitempty"`
	Created  *time.Time              `json:"created,omitempty"`
	Balance  *AccountView            `json:"balance,omitempty"`
	Mandates []*gateway.MandateState `json:"mandates,omitempty"`
	Keys     []KeyView               `json:"keys,omitempty"`
	Key      *KeyView                `json:"key,omitempty"`
	Mandate  *gateway.MandateState   `json:"mandate,omitempty"`
	// GitHub is the linked GitHub account (human keys; publishing needs it).
	GitHub *GitHubLink `json:"github,omitempty"`
	// Claimed says a GitHub sign-in that proved the email took the
	// account over from its unproved signup, revoking the keys made before.
	Claimed *Claim `json:"claimed,omitempty"`
}

// GitHubLink is the GitHub account an account signed in with.
type GitHubLink struct {
	ID    int64  `json:"id"`
	Login string `json:"login"`
	// Linked is when the link was made; Seen the last sign-in.
	Linked time.Time `json:"linked"`
	Seen   time.Time `json:"seen"`
}

// Claim says when a GitHub sign-in with a verified email took over an
// account made by email signup, which never proved that email, and how
// many keys made before it were revoked then: shown to the person on
// GET /v0/me and on the console's overview.
type Claim struct {
	At          time.Time `json:"at"`
	GitHub      string    `json:"github"`
	KeysRevoked int       `json:"keys_revoked"`
}

// KeyView is a key as listings show it: identified by its prefix.
type KeyView struct {
	Prefix      string     `json:"prefix"`
	Kind        string     `json:"kind"`
	Mandate     string     `json:"mandate,omitempty"`
	AskInClient bool       `json:"ask_in_client"`
	Created     time.Time  `json:"created"`
	Expires     *time.Time `json:"expires,omitempty"`
	Client      string     `json:"client,omitempty"`
}

// Money is a signed amount in micro-units: balances of external accounts
// are negative (the journal sums to zero), and journal.Amount's text form
// has no sign.
type Money int64

// UnmarshalText reads a decimal string with an optional leading minus.
func (m *Money) UnmarshalText(b []byte) error {
	s, neg := strings.CutPrefix(string(b), "-")
	a, err := journal.ParseAmount(s)
	if err != nil {
		return err
	}
	*m = Money(a.Micros())
	if neg {
		*m = -*m
	}
	return nil
}

// MarshalText is the decimal form, with a minus when negative.
func (m Money) MarshalText() ([]byte, error) { return journal.Amount(m).MarshalText() }

// String is the decimal form, with a minus when negative.
func (m Money) String() string {
	if m < 0 {
		return "-" + journal.Amount(-m).String()
	}
	return journal.Amount(m).String()
}
