package holon

import (
	"errors"
	"fmt"
	"strings"
)

// ErrNotFound is returned when a record does not exist.
var ErrNotFound = errors.New("not found")

// ErrClosed is returned by updates submitted after Close.
var ErrClosed = errors.New("store is closed")

// ErrBroken is returned by every update after a commit failed: the disk
// refused a write, and a later commit could land on top of pages it lost.
var ErrBroken = errors.New("store is broken: a commit failed")

// Error codes a caller can act on (spec/gateway.md, spec/mandate.md,
// spec/manifest.md). They appear in receipts and in API error bodies.
const (
	// Admission (mandate.md §3), in the order the checks run.
	CodeMandateInactive    = "mandate_inactive"
	CodeDeniedByMandate    = "denied_by_mandate"
	CodeNotAllowed         = "not_allowed"
	CodeRequirementNotMet  = "requirement_not_met"
	CodeDataPolicy         = "data_policy"
	CodeNoFxRate           = "no_fx_rate"
	CodeBelowFixedPrice    = "below_fixed_price"
	CodeOverPerCall        = "over_per_call"
	CodeOverBudget         = "over_budget"
	CodeDelegationDepth    = "delegation_depth"
	CodeApprovalRequired   = "approval_required"
	CodeNotDeclared        = "not_declared"
	CodeInvalidManifest    = "invalid_manifest"
	CodeInvalidMandate     = "invalid_mandate"
	CodeInvalidRequest     = "invalid_request"
	CodeNotFound           = "not_found"
	CodeRejectedInput      = "rejected_input"
	CodeInvalidOutput      = "invalid_output"
	CodeAgentError         = "agent_error"
	CodeTimeout            = "timeout"
	CodeRuntimeUnavailable = "runtime_unavailable"
	CodeGatewayError       = "gateway_error"
	CodeGatewayRestarted   = "gateway_restarted"
	CodeFileNotFound       = "file_not_found"
	CodeInvalidUnits       = "invalid_units"
	CodeInvalidQuote       = "invalid_quote"
)

// Codes of the call beyond the documents (spec/gateway.md).
const (
	// CodeInsufficientFunds: the payer's balance, less what is held, does
	// not cover the call's worst case.
	CodeInsufficientFunds = "insufficient_funds"
	// CodeInvalidApproval: the approval named by a call is unknown, not
	// granted, already used, expired, or bound to another call.
	CodeInvalidApproval = "invalid_approval"
)

// CodeStoreUnavailable: the gateway's database cannot be reached for now
// (a PostgreSQL store restarting or unreachable), answered 503. A request
// answered with it changed nothing, except a call whose agent had run:
// its receipt is closed failed and unbilled once the database is back.
// The gateway reconnects on its own.
const CodeStoreUnavailable = "store_unavailable"

// ClosedUnsettled reports whether a call event's error code is one the
// gateway gives a call it closes without settling it: at start-up or by
// another gateway once its lease ran out (gateway_restarted), or once the
// store answers again after the answer of its reservation was lost
// (store_unavailable). Agents cannot declare either code. Such a run has
// no latency: it is in no latency histogram.
func ClosedUnsettled(code string) bool {
	return code == CodeGatewayRestarted || code == CodeStoreUnavailable
}

// CodeInvalidToken: a delegation token that is unknown, expired, or whose
// run has ended.
const CodeInvalidToken = "invalid_token"

// CodeUnreadableDocument is the declared error a downloading agent fails
// with when a file does not arrive whole: its download failed, or what
// arrived does not have the declared size and SHA-256. Agents that read
// files declare it unbilled, so that the caller does not pay for a bad run.
const CodeUnreadableDocument = "unreadable_document"

// FieldError is one problem in a document, named by its field path
// ("pricing.max", "calls[1].max_cost").
type FieldError struct {
	Path string `json:"path"`
	Msg  string `json:"message"`
}

// Error formats the problem as "path: message".
func (e FieldError) Error() string {
	if e.Path == "" {
		return e.Msg
	}
	return e.Path + ": " + e.Msg
}

// Error is Holon's error: a stable code a caller can act on, a message
// that says what to fix and, for documents, every field that is wrong.
type Error struct {
	Code   string       `json:"code"`
	Msg    string       `json:"message"`
	Fields []FieldError `json:"fields,omitempty"`
	Err    error        `json:"-"`
}

// Error formats the code, the message and each field error on its own line.
func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(e.Code)
	if e.Msg != "" {
		b.WriteString(": ")
		b.WriteString(e.Msg)
	}
	for _, f := range e.Fields {
		b.WriteString("\n  ")
		b.WriteString(f.Error())
	}
	if e.Err != nil && e.Msg == "" {
		b.WriteString(": ")
		b.WriteString(e.Err.Error())
	}
	return b.String()
}

// Unwrap returns the underlying error, if any.
func (e *Error) Unwrap() error { return e.Err }

// Errorf builds an *Error with a code and a formatted message.
func Errorf(code, format string, args ...any) *Error {
	return &Error{Code: code, Msg: fmt.Sprintf(format, args...)}
}

// ErrorCode returns the code of err if it is (or wraps) an *Error, else
// gateway_error.
func ErrorCode(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return CodeGatewayError
}

// ErrorMessage returns the message of err if it is (or wraps) an *Error
// with one, else the error's text.
func ErrorMessage(err error) string {
	var ge *Error
	if errors.As(err, &ge) && ge.Msg != "" {
		return ge.Msg
	}
	return err.Error()
}
