package web

import (
	"errors"
	"holon.dev/holon"
	"net/http"
)

// InternalMessage is all a caller learns of an internal error: the error
// itself goes to the log.
const InternalMessage = "internal error: the gateway could not answer; the operator's log has the details"

// StatusOf is the HTTP status of an error code, from the one table
// (Status); a code the table does not know is internal.
func StatusOf(code string) int {
	if s, ok := Status(code); ok {
		return s
	}
	return http.StatusInternalServerError
}

// Public is what the API answers err with: its *holon.Error and the
// table's status, or, for an error that carries no code the table knows,
// 500 gateway_error with a message that tells nothing of the error.
// internal reports whether err is the gateway's own failure, the only kind
// that is logged.
func Public(err error) (ge *holon.Error, status int, internal bool) {
	if errors.As(err, &ge) {
		if s, ok := Status(ge.Code); ok {
			return ge, s, ge.Code == holon.CodeGatewayError
		}
	}
	return holon.Errorf(holon.CodeGatewayError, "%s", InternalMessage), http.StatusInternalServerError, true
}
