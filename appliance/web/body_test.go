package web_test

import (
	"bytes"
	"errors"
	"net/http/httptest"
	"strings"
	"testing"

	"holon.dev/holon"
	"holon.dev/holon/appliance/web"
)

// Ensure that ReadBody returns the whole body whatever the request says of
// its length: the length it declares, none (-1), a length shorter or
// longer than the body (a request built in the process, not read from a
// connection), and that a body past MaxBody is refused either way.
func TestReadBody_Lengths(t *testing.T) {
	body := `{"mandate":"m","agent":"a","input":{"n":1}}`
	for _, n := range []int64{int64(len(body)), -1, 3, int64(len(body)) + 100, 0} {
		r := httptest.NewRequest("POST", "/v0/calls", strings.NewReader(body))
		r.ContentLength = n
		got, err := web.ReadBody(r)
		if err != nil || string(got) != body {
			t.Errorf("content length %d: %q, %v; want the body", n, got, err)
		}
	}
	big := bytes.Repeat([]byte("a"), web.MaxBody+1)
	for _, n := range []int64{int64(len(big)), -1, web.MaxBody} {
		r := httptest.NewRequest("POST", "/v0/calls", bytes.NewReader(big))
		r.ContentLength = n
		_, err := web.ReadBody(r)
		var ge *holon.Error
		if !errors.As(err, &ge) || ge.Code != web.CodeBodyTooLarge {
			t.Errorf("content length %d, body of %d bytes: %v; want %s", n, len(big), err, web.CodeBodyTooLarge)
		}
	}
}
