package web

import (
	"maps"
	"net/http"

	"holon.dev/holon"
)

// httpStatus is the one table of HTTP statuses: the status the API
// answers each error code with, for the gateway's codes and for those of
// the hosted product (appliance) alike, so that every place that answers
// an error (the JSON API, delegated calls, the console) agrees. A code
// missing here is treated as an internal error: 500 gateway_error, logged.
// The tests check that every code the project declares has a row.
var httpStatus = map[string]int{
	// Admission (mandate.md §3): the call is denied.
	holon.CodeMandateInactive:   http.StatusForbidden,
	holon.CodeDeniedByMandate:   http.StatusForbidden,
	holon.CodeNotAllowed:        http.StatusForbidden,
	holon.CodeRequirementNotMet: http.StatusForbidden,
	holon.CodeDataPolicy:        http.StatusForbidden,
	holon.CodeNoFxRate:          http.StatusForbidden,
	holon.CodeBelowFixedPrice:   http.StatusForbidden,
	holon.CodeOverPerCall:       http.StatusForbidden,
	holon.CodeOverBudget:        http.StatusForbidden,
	holon.CodeDelegationDepth:   http.StatusForbidden,
	holon.CodeApprovalRequired:  http.StatusForbidden,
	holon.CodeNotDeclared:       http.StatusForbidden,
	holon.CodeInsufficientFunds: http.StatusForbidden,
	// The request itself.
	holon.CodeInvalidManifest: http.StatusBadRequest,
	holon.CodeInvalidMandate:  http.StatusBadRequest,
	holon.CodeInvalidRequest:  http.StatusBadRequest,
	holon.CodeNotFound:        http.StatusNotFound,
	holon.CodeFileNotFound:    http.StatusNotFound,
	holon.CodeRejectedInput:   http.StatusUnprocessableEntity,
	holon.CodeInvalidApproval: http.StatusConflict,
	// Refunds: what the receipt allows.
	holon.CodeReceiptNotBilled: http.StatusConflict,
	holon.CodeRefundTooLarge:   http.StatusConflict,
	// Reports: parameters they cannot answer.
	holon.CodeInvalidReport: http.StatusBadRequest,
	holon.CodeInvalidToken:  http.StatusUnauthorized,
	// The agent failed (gateway.md §5: 502).
	holon.CodeInvalidOutput:      http.StatusBadGateway,
	holon.CodeAgentError:         http.StatusBadGateway,
	holon.CodeTimeout:            http.StatusBadGateway,
	holon.CodeRuntimeUnavailable: http.StatusBadGateway,
	holon.CodeInvalidUnits:       http.StatusBadGateway,
	holon.CodeInvalidQuote:       http.StatusBadGateway,
	holon.CodeUnreadableDocument: http.StatusBadGateway,
	// The gateway itself failed: internal.
	holon.CodeGatewayError:     http.StatusInternalServerError,
	holon.CodeGatewayRestarted: http.StatusInternalServerError,
	// The store cannot be reached for now: try again shortly.
	holon.CodeStoreUnavailable: http.StatusServiceUnavailable,

	// The hosted product (appliance/errors.go, publish.go, signin.go,
	// files, oauth, mcpserver).
	CodeUnauthenticated:          http.StatusUnauthorized,
	CodeInvalidKey:               http.StatusUnauthorized,
	CodeForbidden:                http.StatusForbidden,
	"origin_not_allowed":         http.StatusForbidden,
	"insufficient_scope":         http.StatusForbidden,
	"host_not_allowed":           http.StatusMisdirectedRequest,
	"email_disabled":             http.StatusForbidden,
	"email_unverified":           http.StatusForbidden,
	"approval_rejected":          http.StatusForbidden,
	"invalid_link":               http.StatusForbidden,
	CodeRateLimited:              http.StatusTooManyRequests,
	CodeBodyTooLarge:             http.StatusRequestEntityTooLarge,
	"file_too_large":             http.StatusRequestEntityTooLarge,
	"file_quota_exceeded":        http.StatusRequestEntityTooLarge,
	CodeNULCharacter:             http.StatusBadRequest,
	"invalid_handle":             http.StatusBadRequest,
	"invalid_email":              http.StatusBadRequest,
	"invalid_idempotency_key":    http.StatusBadRequest,
	"invalid_credential":         http.StatusBadRequest,
	"login_code_invalid":         http.StatusBadRequest,
	"login_code_expired":         http.StatusBadRequest,
	"login_code_other_browser":   http.StatusForbidden,
	"oauth_invalid_client":       http.StatusBadRequest,
	"oauth_invalid_redirect_uri": http.StatusBadRequest,
	"handle_taken":               http.StatusConflict,
	"email_taken":                http.StatusConflict,
	"email_linked_elsewhere":     http.StatusConflict,
	"mandate_exists":             http.StatusConflict,
	"limit_reached":              http.StatusConflict,
	"key_revoked":                http.StatusConflict,
	"idempotency_in_flight":      http.StatusConflict,
	"idempotency_interrupted":    http.StatusConflict,
	"account_disabled":           http.StatusForbidden,
	"already_disabled":           http.StatusConflict,
	"shipped_agent":              http.StatusConflict,
	"already_yanked":             http.StatusConflict,
	"idempotency_mismatch":       http.StatusUnprocessableEntity,
	"shutting_down":              http.StatusServiceUnavailable,
	// Sign-in and publishing.
	"github_not_configured":   http.StatusServiceUnavailable,
	"github_unavailable":      http.StatusServiceUnavailable,
	"credentials_unavailable": http.StatusServiceUnavailable,
	"not_your_namespace":      http.StatusForbidden,
	"github_not_linked":       http.StatusForbidden,
	"repository_not_yours":    http.StatusForbidden,
	"not_public_member":       http.StatusForbidden,
	"repository_not_found":    http.StatusUnprocessableEntity,
	"runtime_not_published":   http.StatusBadRequest,
	"endpoint_not_https":      http.StatusBadRequest,
	"endpoint_not_public":     http.StatusBadRequest,
	"endpoint_unresolvable":   http.StatusBadRequest,
	"version_exists":          http.StatusConflict,
	"draft_call_failed":       http.StatusBadGateway,
}

// Status returns the HTTP status an error code is answered with, and
// false for a code the table does not know: an error with such a code (or
// with none) is internal, answered 500 gateway_error.
func Status(code string) (int, bool) {
	s, ok := httpStatus[code]
	return s, ok
}

// Statuses returns a copy of the whole table of Status: every code the
// API answers with, and its status.
func Statuses() map[string]int { return maps.Clone(httpStatus) }

// Error codes of the front door, which every room answers with too. Each
// one comes with a message that says what to fix.
const (
	// CodeUnauthenticated: the endpoint needs a key and none was sent.
	CodeUnauthenticated = "unauthenticated"
	// CodeInvalidKey: the key sent is malformed, unknown, revoked or expired.
	CodeInvalidKey = "invalid_key"
	// CodeForbidden: this kind of key may not use this endpoint.
	CodeForbidden = "forbidden"
	// CodeRateLimited: too many requests; Retry-After says when to retry.
	CodeRateLimited = "rate_limited"
	// CodeBodyTooLarge: the request body is over the limit.
	CodeBodyTooLarge = "body_too_large"
	// CodeNULCharacter: a NUL character in the body, path or query.
	CodeNULCharacter = "nul_character"
)
