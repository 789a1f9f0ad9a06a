package console

import (
	"errors"
	"net/http"
	"testing"

	"holon.dev/holon"
	"holon.dev/holon/webui"
)

// Ensure that the console gets the table's status for an error with a
// known code, and the internal error itself (which it logs, showing a page
// that tells nothing of it) otherwise.
func TestAPIError_Console(t *testing.T) {
	var ae *webui.APIError
	if err := apiError(holon.Errorf("handle_taken", "carol is taken")); !errors.As(err, &ae) || ae.Status != http.StatusConflict {
		t.Errorf("handle_taken: %#v, want a 409 APIError", err)
	}
	for _, err := range []error{errors.New("disk"), holon.Errorf("no_such_code", "x"), holon.Errorf(holon.CodeGatewayError, "x")} {
		if got := apiError(err); errors.As(got, &ae) {
			t.Errorf("%v: %#v, want the internal error itself", err, got)
		}
	}
}
