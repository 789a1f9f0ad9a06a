package gateway

import (
	"holon.dev/holon"
	"holon.dev/holon/gateway/canonical"
)

// CheckJSON checks that b is strict JSON (canonical.Check: I-JSON, RFC
// 7493), as every body, call input and agent's answer the gateway reads
// must be, so what the gateway validates is what an agent or a caller
// receives. The error is an *Error invalid_request that starts with what
// (such as "input") and names the problem and its byte offset; it wraps the
// *canonical.Error.
func CheckJSON(b []byte, what string) error {
	if err := canonical.Check(b); err != nil {
		return strictError(err, what)
	}
	return nil
}

// checkedValue checks b as CheckJSON does and returns its value in the form
// a schema validates (canonical.Value, contract.Schema.ValidateDecoded),
// so that checking and validating read b once.
func checkedValue(b []byte, what string) (any, error) {
	v, err := canonical.Value(b)
	if err != nil {
		return nil, strictError(err, what)
	}
	return v, nil
}

func strictError(err error, what string) error {
	return &holon.Error{Code: holon.CodeInvalidRequest, Msg: what + ": " + err.Error(), Err: err}
}

// DecodeJSON decodes b into v strictly (canonical.Decode: strict JSON, field
// names spelt exactly, no unknown field). Errors are *Error invalid_request
// starting with what.
func DecodeJSON(b []byte, v any, what string) error {
	if err := canonical.Decode(b, v); err != nil {
		return &holon.Error{Code: holon.CodeInvalidRequest, Msg: what + ": " + err.Error(), Err: err}
	}
	return nil
}
