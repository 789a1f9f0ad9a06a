package appliance

import (
	"errors"
	"net/http"

	"holon.dev/holon"
)

// Error codes of the hosted product, beyond the gateway's own. Each one
// comes with a message that says what to fix.
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
	// CodeInvalidHandle and CodeInvalidEmail: a signup's fields are malformed.
	CodeInvalidHandle = "invalid_handle"
	CodeInvalidEmail  = "invalid_email"
	// CodeHandleTaken: the handle has an account already, or is reserved.
	CodeHandleTaken = "handle_taken"
	// CodeEmailTaken: the email has an account already.
	CodeEmailTaken = "email_taken"
	// CodeEmailDisabled: the email belongs to a disabled account.
	CodeEmailDisabled = "email_disabled"
	// CodeMandateExists: a mandate with this id exists already.
	CodeMandateExists = "mandate_exists"
	// CodeLimitReached: an account holds as many mandates or keys as it may.
	CodeLimitReached = "limit_reached"
	// CodeKeyRevoked: the key named is revoked already.
	CodeKeyRevoked = "key_revoked"
	// CodeInvalidIdempotencyKey: the Idempotency-Key header is malformed.
	CodeInvalidIdempotencyKey = "invalid_idempotency_key"
	// CodeIdempotencyInFlight: the call of this Idempotency-Key is running.
	CodeIdempotencyInFlight = "idempotency_in_flight"
	// CodeIdempotencyInterrupted: a restart interrupted the call of this
	// Idempotency-Key; its outcome is unknown.
	CodeIdempotencyInterrupted = "idempotency_interrupted"
	// CodeIdempotencyMismatch: the Idempotency-Key was used with another request.
	CodeIdempotencyMismatch = "idempotency_mismatch"
	// CodeAccountDisabled: the account is disabled already.
	CodeAccountDisabled = "account_disabled"
	// CodeShippedAgent: agents shipped with the gateway are not moderated.
	CodeShippedAgent = "shipped_agent"
	// CodeAlreadyYanked: the agent version was withdrawn already.
	CodeAlreadyYanked = "already_yanked"
)

// internalMessage is all a caller learns of an internal error: the error
// itself goes to the log.
const internalMessage = "internal error: the gateway could not answer; the operator's log has the details"

// errorStatus is the HTTP status of an error code, from the gateway's one
// table (holon.HTTPStatus); a code the table does not know is internal.
func errorStatus(code string) int {
	if s, ok := holon.HTTPStatus(code); ok {
		return s
	}
	return http.StatusInternalServerError
}

// publicError is what the API answers err with: its *holon.Error and the
// table's status, or, for an error that carries no code the table knows,
// 500 gateway_error with a message that tells nothing of the error.
// internal reports whether err is the gateway's own failure, the only kind
// that is logged.
func publicError(err error) (ge *holon.Error, status int, internal bool) {
	if errors.As(err, &ge) {
		if s, ok := holon.HTTPStatus(ge.Code); ok {
			return ge, s, ge.Code == holon.CodeGatewayError
		}
	}
	return holon.Errorf(holon.CodeGatewayError, "%s", internalMessage), http.StatusInternalServerError, true
}
