package alerts

import (
	"fmt"
	"time"
)

// The delivery schedule's defaults: the first retry 30 seconds after a
// failed send, each next one twice as late, at most an hour apart, for
// 24 hours after the alert; the worker looks for due deliveries every
// 5 seconds (at once when a settlement records an alert).
const (
	DefaultRetryFor   = 24 * time.Hour
	DefaultFirstRetry = 30 * time.Second
	DefaultMaxBackoff = time.Hour
	DefaultPoll       = 5 * time.Second
)

// Settings are the delivery schedule.
type Settings struct {
	// RetryFor is how long after an alert its delivery is retried
	// (HOLON_ALERT_RETRY_FOR); then it is given up as failed.
	RetryFor time.Duration
	// FirstRetry is the wait after the first failed send
	// (HOLON_ALERT_FIRST_RETRY); each next wait doubles, up to MaxBackoff.
	FirstRetry, MaxBackoff time.Duration
	// Poll is how often the worker looks for due deliveries.
	Poll time.Duration
}

// withDefaults fills what is unset.
func (s Settings) withDefaults() Settings {
	if s.RetryFor <= 0 {
		s.RetryFor = DefaultRetryFor
	}
	if s.FirstRetry <= 0 {
		s.FirstRetry = DefaultFirstRetry
	}
	if s.MaxBackoff <= 0 {
		s.MaxBackoff = DefaultMaxBackoff
	}
	if s.MaxBackoff < s.FirstRetry {
		s.MaxBackoff = s.FirstRetry
	}
	if s.Poll <= 0 {
		s.Poll = min(DefaultPoll, s.FirstRetry)
	}
	return s
}

// SettingsFromEnv reads HOLON_ALERT_RETRY_FOR and HOLON_ALERT_FIRST_RETRY
// (Go durations such as 24h or 30s); unset, the defaults.
func SettingsFromEnv(getenv func(string) string) (Settings, error) {
	var s Settings
	var err error
	read := func(name string, into *time.Duration) {
		v := getenv(name)
		if v == "" || err != nil {
			return
		}
		d, perr := time.ParseDuration(v)
		if perr != nil || d <= 0 {
			err = fmt.Errorf("%s: %q is not a duration such as 24h or 30s", name, v)
			return
		}
		*into = d
	}
	read("HOLON_ALERT_RETRY_FOR", &s.RetryFor)
	read("HOLON_ALERT_FIRST_RETRY", &s.FirstRetry)
	return s, err
}

// backoff is the wait after the n-th failed send (n from 1): FirstRetry,
// doubled each time, at most MaxBackoff.
func (s Settings) backoff(n int) time.Duration {
	d := s.FirstRetry
	for i := 1; i < n && d < s.MaxBackoff; i++ {
		d *= 2
	}
	return min(d, s.MaxBackoff)
}
