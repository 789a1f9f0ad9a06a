package webui

import (
	"encoding/json"
	"time"

	"holon.dev/holon"
	"holon.dev/holon/gateway"
	"holon.dev/holon/gateway/contract"
	"holon.dev/holon/journal"
)

// The API's answers, as the console reads them (the JSON of gateway.md §4,
// §5 and §7). Receipts and approvals are the domain's own types
// (holon.Receipt, holon.Approval), which are their wire form too; the rest
// are the API's views.

type receiptPage struct {
	Receipts []*holon.Receipt `json:"receipts"`
	Next     string           `json:"next"`
	// Scanned is set when a filtered page stopped at its scan bound.
	Scanned int `json:"scanned,omitempty"`
}

type receiptTree struct {
	Receipt  *holon.Receipt `json:"receipt"`
	Children []*receiptTree `json:"children"`
}

type accountView struct {
	Account   string `json:"account"`
	Balance   money  `json:"balance"`
	Held      money  `json:"held"`
	Available money  `json:"available"`
}

type keyView struct {
	Prefix      string     `json:"prefix"`
	Kind        string     `json:"kind"`
	Mandate     string     `json:"mandate"`
	AskInClient bool       `json:"ask_in_client"`
	Created     time.Time  `json:"created"`
	Expires     *time.Time `json:"expires"`
	// Client is the OAuth client the key was made for (connect.go).
	Client string `json:"client"`
}

type me struct {
	Kind     string                  `json:"kind"`
	Handle   string                  `json:"handle"`
	Email    string                  `json:"email"`
	Balance  *accountView            `json:"balance"`
	Mandates []*gateway.MandateState `json:"mandates"`
	Keys     []keyView               `json:"keys"`
	Claimed  *claimed                `json:"claimed"`
}

// claimed is a GitHub sign-in that proved the account's email taking it
// over from its unproved signup.
type claimed struct {
	At          time.Time `json:"at"`
	GitHub      string    `json:"github"`
	KeysRevoked int       `json:"keys_revoked"`
}

type agentItem struct {
	ID           string           `json:"id"`
	Version      string           `json:"version"`
	Summary      string           `json:"summary"`
	Capabilities []string         `json:"capabilities"`
	License      string           `json:"license"`
	WorstCase    journal.Amount   `json:"worst_case"`
	Currency     string           `json:"currency"`
	Pricing      contract.Pricing `json:"pricing"`
	Record       struct {
		Runs      int64 `json:"runs"`
		Succeeded int64 `json:"succeeded"`
	} `json:"record"`
	Denied *holon.Error `json:"denied"`
}

type agentDetail struct {
	Manifest *contract.Manifest `json:"manifest"`
	Record   measured           `json:"record"`
	Versions []string           `json:"versions"`
}

type callAnswer struct {
	Output   json.RawMessage `json:"output"`
	Receipt  *holon.Receipt  `json:"receipt"`
	Approval *holon.Approval `json:"approval"`
	Error    *holon.Error    `json:"error"`
}

// measured is an agent version's record, as the gateway measured it.
type measured struct {
	Runs       int64          `json:"runs"`
	Succeeded  int64          `json:"succeeded"`
	Billed     journal.Amount `json:"billed"`
	DurationMS int64          `json:"duration_ms"`
}
