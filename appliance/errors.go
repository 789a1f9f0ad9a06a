package appliance

import (
	"net/http"

	"holon.dev/holon/gateway"
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

// errorStatus maps an error code to its HTTP status.
func errorStatus(code string) int {
	if s, ok := publishStatus[code]; ok {
		return s
	}
	switch code {
	case gateway.CodeInvalidRequest, gateway.CodeInvalidManifest, gateway.CodeInvalidMandate,
		CodeNULCharacter, CodeInvalidHandle, CodeInvalidEmail, CodeInvalidIdempotencyKey:
		return http.StatusBadRequest
	case CodeUnauthenticated, CodeInvalidKey:
		return http.StatusUnauthorized
	case CodeForbidden, CodeEmailDisabled:
		return http.StatusForbidden
	case gateway.CodeNotFound:
		return http.StatusNotFound
	case gateway.CodeInvalidApproval, CodeHandleTaken, CodeEmailTaken, CodeMandateExists,
		CodeLimitReached, CodeKeyRevoked, CodeIdempotencyInFlight, CodeIdempotencyInterrupted,
		CodeAccountDisabled, CodeShippedAgent, CodeAlreadyYanked:
		return http.StatusConflict
	case CodeBodyTooLarge:
		return http.StatusRequestEntityTooLarge
	case gateway.CodeRejectedInput, CodeIdempotencyMismatch:
		return http.StatusUnprocessableEntity
	case CodeRateLimited:
		return http.StatusTooManyRequests
	case gateway.CodeGatewayError, gateway.CodeGatewayRestarted:
		return http.StatusInternalServerError
	}
	return http.StatusBadRequest
}
