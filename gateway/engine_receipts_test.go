package gateway_test

import (
	"errors"
	"testing"

	"holon.dev/holon"
)

// Ensure that Receipts refuses a cursor that is not a receipt id as the
// caller's invalid_request, and passes a store failure on as the store's
// own error (internal), never as invalid_request.
func TestEngine_Receipts_Errors(t *testing.T) {
	te := newEngine(t, nil, nil)
	if _, err := te.eng.Receipts("", "nope", 10); holon.ErrorCode(err) != holon.CodeInvalidRequest {
		t.Errorf("a bad cursor: %v, want %s", err, holon.CodeInvalidRequest)
	}
	if _, err := te.eng.Receipts("", "r1", 10); err != nil {
		t.Errorf("a good cursor: %v", err)
	}
	old := te.restart(t) // its store is closed under it
	_, err := old.Receipts("", "", 10)
	var ge *holon.Error
	if err == nil || errors.As(err, &ge) {
		t.Errorf("a closed store: %v, want the store's error, with no code", err)
	}
}
