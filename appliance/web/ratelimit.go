package web

import (
	"log/slog"
	"math"
	"net/http"
	"strconv"
	"time"

	"holon.dev/holon"
)

// RetryAfter is a Retry-After value: whole seconds, at least 1.
func RetryAfter(d time.Duration) string {
	s := int64(math.Ceil(d.Seconds()))
	if s < 1 {
		s = 1
	}
	return strconv.FormatInt(s, 10)
}

// TooMany answers 429 rate_limited with Retry-After.
func TooMany(log *slog.Logger, w http.ResponseWriter, r *http.Request, wait time.Duration, who string) {
	ra := RetryAfter(wait)
	w.Header().Set("Retry-After", ra)
	Fail(log, w, r, holon.Errorf(CodeRateLimited, "too many requests from %s: retry in %s s", who, ra))
}
