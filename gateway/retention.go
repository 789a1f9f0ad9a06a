package gateway

import (
	"fmt"
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
	n, _ := strconv.Atoi(m[1])
	unit := map[string]time.Duration{
		"s": time.Second, "m": time.Minute, "h": time.Hour,
		"d": 24 * time.Hour, "w": 7 * 24 * time.Hour,
	}[m[2]]
	return time.Duration(n) * unit, nil
}
