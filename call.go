package holon

import (
	"encoding/json"
	"strconv"
	"strings"
	"time"

	"holon.dev/holon/journal"
)

// Approval is a call held for a human's decision (mandate.md §6), bound to
// the mandate, the exact agent version, the input's hash and max_cost.
type Approval struct {
	ID      string `json:"id"`
	Mandate string `json:"mandate"`
	Caller  string `json:"caller"`
	Agent   string `json:"agent"`
	// Capability is set when the held call asked for a capability, so that
	// approve-and-run admits it as the same capability call.
	Capability string          `json:"capability,omitempty"`
	InputHash  string          `json:"input_hash"`
	MaxCost    *journal.Amount `json:"max_cost"`
	WorstCase  journal.Amount  `json:"worst_case"`
	Currency   string          `json:"currency"`
	Receipt    string          `json:"receipt"`
	// Status is pending, granted (run: false), used, rejected or expired.
	Status  string    `json:"status"`
	Created time.Time `json:"created"`
	Expires time.Time `json:"expires"`
	// Decided is when a human approved, granted or rejected it.
	Decided *time.Time `json:"decided"`
	// Run is the receipt of the call it let through, once used.
	Run *string `json:"run"`
	// Input is kept only while the approval is pending or granted, and
	// deleted when it is used, rejected or expires.
	Input json.RawMessage `json:"input,omitempty"`
}

// Approval statuses.
const (
	ApprovalPending  = "pending"
	ApprovalGranted  = "granted"
	ApprovalUsed     = "used"
	ApprovalRejected = "rejected"
	ApprovalExpired  = "expired"
)

// ApprovalPage is one page of approvals, newest first.
type ApprovalPage struct {
	Approvals []*Approval `json:"approvals"`
	// Next is the cursor for the following (older) page, "" at the end.
	// A page ends early, with a Next, once it has read its share of
	// approvals, so a page may hold fewer than asked and still have one.
	Next string `json:"next"`
}

// ApprovalSeq turns an approval id ("a3") into its sequence number.
func ApprovalSeq(id string) (uint64, bool) {
	if !strings.HasPrefix(id, "a") {
		return 0, false
	}
	n, err := strconv.ParseUint(id[1:], 10, 64)
	return n, err == nil && n > 0
}

// Hold is a call in flight: what it reserved and what it holds, so that
// settlement, or a restart, releases exactly that. It is the authoritative
// state of a running call's money.
type Hold struct {
	Receipt string `json:"receipt"`
	// Payer is the account the call's cost is taken from.
	Payer string `json:"payer"`
	// Amount is what is still held on Payer's balance by this call: the
	// worst case at the start, less what its passthrough descendants have
	// spent. Zero for a passthrough child, which draws on its parent's hold.
	Amount journal.Amount `json:"amount"`
	// Mandate is the mandate the call runs under; Reserved is what is still
	// reserved in its budget for the call.
	Mandate  string         `json:"mandate"`
	Reserved journal.Amount `json:"reserved"`
	// Window is the budget window of Mandate that Reserved is also counted
	// in, and that the call's charge is spent in ("" when the mandate's
	// budget does not renew by window): the window the call was admitted
	// in, even when it settles in the next.
	Window string `json:"window,omitempty"`
	// Funder is the receipt of the parent call whose hold and reservation
	// this call draws on (passthrough), "" for a call that holds its own.
	Funder string `json:"funder,omitempty"`
	// Parent is the parent call's receipt in the tree, for a delegated call.
	Parent string `json:"parent,omitempty"`
	// Children are the delegated calls made so far; Downstream is what the
	// same payer was billed for them (their cost.total).
	Children   []string       `json:"children,omitempty"`
	Downstream journal.Amount `json:"downstream"`
	// SubMandate is the derived mandate of an orchestrator's run.
	SubMandate string    `json:"sub_mandate,omitempty"`
	Started    time.Time `json:"started"`
}

// Event is one finished run, as the platform measures it (gateway.md §7
// "call_events"): append-only.
type Event struct {
	Seq        uint64         `json:"seq"`
	Receipt    string         `json:"receipt"`
	Agent      string         `json:"agent"`
	Status     string         `json:"status"`
	Error      string         `json:"error,omitempty"`
	DurationMS int64          `json:"duration_ms"`
	Billed     journal.Amount `json:"billed"`
	Currency   string         `json:"currency"`
	Delegated  bool           `json:"delegated"`
	Time       time.Time      `json:"time"`
}

// Record is an agent version's measured record, kept as counters from the
// events so that nobody scans the events to rank agents.
type Record struct {
	Runs       int64          `json:"runs"`
	Succeeded  int64          `json:"succeeded"`
	Billed     journal.Amount `json:"billed"`
	DurationMS int64          `json:"duration_ms"`
}
