package contract

import (
	"fmt"
	"strconv"
	"strings"

	"holon.dev/holon/journal"
)

// Budget alerts (budget.alerts): percentages of the budget at which the
// issuer is told, such as ["50%", "80%", "95%"]. Each applies to every
// budget the mandate has: each window's budget.per_window (once per
// window) and the lifetime budget.total (once). An alert is a notice,
// not authority: it widens and narrows nothing, so attenuation does not
// compare them, and a derived sub-mandate has none (its parent's alerts
// count its spending, which is the parent's too).

// MaxAlerts bounds budget.alerts.
const MaxAlerts = 10

// AlertThreshold is a percentage of a budget, kept in hundredths of a
// percent (8000 is 80%), written "80%" or "12.5%".
type AlertThreshold int64

// ParseAlertThreshold reads a percentage above 0 and at most 100, with at
// most two decimals, followed by "%".
func ParseAlertThreshold(s string) (AlertThreshold, error) {
	num, ok := strings.CutSuffix(s, "%")
	if !ok {
		return 0, fmt.Errorf("%q is not a percentage of the budget such as \"80%%\"", s)
	}
	whole, frac, hasFrac := strings.Cut(num, ".")
	if whole == "" || len(whole) > 3 || (hasFrac && (frac == "" || len(frac) > 2)) || !digits(whole) || !digits(frac) {
		return 0, fmt.Errorf("%q is not a percentage such as \"80%%\" or \"12.5%%\" (at most two decimals)", s)
	}
	w, _ := strconv.ParseInt(whole, 10, 64)
	for len(frac) < 2 {
		frac += "0"
	}
	f, _ := strconv.ParseInt(frac, 10, 64)
	t := AlertThreshold(w*100 + f)
	if t <= 0 || t > 10000 {
		return 0, fmt.Errorf("%q is not above 0%% and at most 100%%", s)
	}
	return t, nil
}

func digits(s string) bool {
	for _, r := range s {
		if r < '0' || r > '9' {
			return false
		}
	}
	return true
}

// String writes the threshold as it is read: "80%", "12.5%", "0.05%".
func (t AlertThreshold) String() string {
	s := strconv.FormatInt(int64(t)/100, 10)
	if f := int64(t) % 100; f != 0 {
		s += strings.TrimRight(fmt.Sprintf(".%02d", f), "0")
	}
	return s + "%"
}

// MarshalText writes the threshold as a percentage.
func (t AlertThreshold) MarshalText() ([]byte, error) { return []byte(t.String()), nil }

// UnmarshalText reads a percentage.
func (t *AlertThreshold) UnmarshalText(b []byte) error {
	v, err := ParseAlertThreshold(string(b))
	if err != nil {
		return err
	}
	*t = v
	return nil
}

// Of is the amount of limit the threshold stands for, rounded up: a
// budget reaches the threshold once its spent is at least that.
func (t AlertThreshold) Of(limit journal.Amount) journal.Amount {
	n := int64(limit)
	q, r := n/10000*int64(t), n%10000*int64(t)
	q += r / 10000
	if r%10000 != 0 {
		q++
	}
	return journal.Amount(q)
}

// validateAlerts checks budget.alerts: no more than MaxAlerts, none twice.
func (m *Mandate) validateAlerts(fe *fieldErrors) {
	as := m.Budget.Alerts
	if len(as) > MaxAlerts {
		fe.add("budget.alerts", "%d thresholds, at most %d", len(as), MaxAlerts)
	}
	seen := map[AlertThreshold]bool{}
	for _, t := range as {
		// The path names the list, not the entry: entries refused
		// before were left out, so the index here is not the document's.
		if seen[t] {
			fe.add("budget.alerts", "%s is named twice", t)
		}
		seen[t] = true
	}
}
