package web

import (
	"net/http"
	"strconv"

	"holon.dev/holon"
)

// Limit is the limit query parameter of a listing: def when absent, and
// a whole number from 1 to max otherwise (400 invalid_request).
func Limit(r *http.Request, def, max int) (int, error) {
	s := r.URL.Query().Get("limit")
	if s == "" {
		return def, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || n > max {
		return 0, holon.Errorf(holon.CodeInvalidRequest, "limit must be between 1 and %d", max)
	}
	return n, nil
}
