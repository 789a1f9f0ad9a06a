package contract

import (
	"fmt"
	"math"
	"strconv"
	"time"
)

// RetentionNone is the retention of an agent that keeps nothing.
const RetentionNone = "none"

// ParseRetention reads a data retention: "none" (zero) or a whole number
// followed by s, m (minutes), h, d or w ("24h", "30d").
func ParseRetention(s string) (time.Duration, error) {
	if s == RetentionNone {
		return 0, nil
	}
	m := retentionRE.FindStringSubmatch(s)
	if m == nil {
		return 0, fmt.Errorf("%q is not none or a duration such as 24h or 30d (units s, m, h, d, w)", s)
	}
	n, _ := strconv.ParseInt(m[1], 10, 64)
	unit := map[string]time.Duration{
		"s": time.Second, "m": time.Minute, "h": time.Hour,
		"d": 24 * time.Hour, "w": 7 * 24 * time.Hour,
	}[m[2]]
	// 999999w does not fit a Duration: the product would wrap around and
	// compare as a short (or negative) retention.
	if n > int64(math.MaxInt64/unit) {
		return 0, fmt.Errorf("%q is too long: at most %dd", s, int64(math.MaxInt64/(24*time.Hour)))
	}
	return time.Duration(n) * unit, nil
}
