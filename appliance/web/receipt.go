package web

import (
	"net/http"

	"holon.dev/holon"
)

// ReceiptStatus maps a call's receipt to the HTTP status of POST /v0/calls:
// 200 succeeded, 202 pending approval, 403 denied, 422 input rejected, 502
// the agent failed (500 when the gateway itself did).
func ReceiptStatus(r *holon.Receipt) int {
	code := ""
	if r.Error != nil {
		code = *r.Error
	}
	switch r.Status {
	case holon.StatusSucceeded:
		return http.StatusOK
	case holon.StatusPendingApproval:
		return http.StatusAccepted
	case holon.StatusRejected:
		return http.StatusUnprocessableEntity
	case holon.StatusDenied:
		switch code {
		case holon.CodeNotFound:
			return http.StatusNotFound
		case holon.CodeInvalidRequest:
			return http.StatusBadRequest
		}
		return http.StatusForbidden
	}
	switch code {
	case holon.CodeGatewayError, holon.CodeGatewayRestarted:
		return http.StatusInternalServerError
	case holon.CodeFileNotFound:
		return http.StatusNotFound
	}
	return http.StatusBadGateway
}
