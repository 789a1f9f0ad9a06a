package contract

import (
	"fmt"
	"time"
)

// Budget windows: a mandate's budget may renew on the calendar, by day,
// week (Monday to Monday) or month, in the time zone budget.timezone names
// (UTC when absent). Each window has its own spent and reserved, and its
// allowance is budget.per_window, beside the optional lifetime
// budget.total. A window begins at midnight local time (or at the first
// instant of the day, where a daylight-saving change skips midnight) and
// ends where the next begins, so a day is 23 or 25 hours long across a
// change. The window that pays for a call is the one it was reserved in:
// a call reserved at 23:59 and settled at 00:01 is charged to the day it
// was admitted in, whose allowance its reservation was checked against.

// The window kinds of budget.window.
const (
	WindowDay   = "day"
	WindowWeek  = "week"
	WindowMonth = "month"
)

// Window is one calendar window of a mandate's budget.
type Window struct {
	// Kind is day, week or month.
	Kind string `json:"kind"`
	// Key names the window among the mandate's windows: the kind and the
	// local date it starts on ("day:2026-12-02", "week:2026-11-30",
	// "month:2026-12").
	Key string `json:"key"`
	// Start is the window's first instant; End the next window's (when it
	// renews).
	Start time.Time `json:"start"`
	End   time.Time `json:"end"`
}

// Windowed reports whether the mandate's budget renews by window.
func (m *Mandate) Windowed() bool { return m.Budget.Window != "" }

// Location is the time zone of the mandate's windows (UTC when
// budget.timezone is absent or not valid).
func (m *Mandate) Location() *time.Location {
	if m.Budget.loc != nil {
		return m.Budget.loc
	}
	if m.Budget.Timezone == "" {
		return time.UTC
	}
	loc, err := loadLocation(m.Budget.Timezone)
	if err != nil {
		return time.UTC
	}
	return loc
}

// WindowAt is the window that holds instant t (false when the mandate's
// budget has no window).
func (m *Mandate) WindowAt(t time.Time) (Window, bool) {
	if !m.Windowed() {
		return Window{}, false
	}
	return WindowAt(m.Budget.Window, m.Location(), t), true
}

// WindowAt is the window of the given kind (day, week or month) in loc
// that holds instant t.
func WindowAt(kind string, loc *time.Location, t time.Time) Window {
	local := t.In(loc)
	y, mo, d := local.Date()
	var sy, ey int
	var sm, em time.Month
	var sd, ed int
	var key string
	switch kind {
	case WindowMonth:
		sy, sm, sd = y, mo, 1
		ey, em, ed = y, mo+1, 1
		key = fmt.Sprintf("month:%04d-%02d", y, mo)
	case WindowWeek:
		back := (int(local.Weekday()) + 6) % 7 // days since Monday
		sy, sm, sd = y, mo, d-back
		ey, em, ed = y, mo, d-back+7
		s := time.Date(sy, sm, sd, 12, 0, 0, 0, time.UTC) // the date alone, normalised
		key = "week:" + s.Format("2006-01-02")
	default:
		sy, sm, sd = y, mo, d
		ey, em, ed = y, mo, d+1
		key = fmt.Sprintf("day:%04d-%02d-%02d", y, mo, d)
	}
	return Window{Kind: kind, Key: key, Start: startOfDay(sy, sm, sd, loc), End: startOfDay(ey, em, ed, loc)}
}

// startOfDay is the first instant of a local date in loc (the date may be
// unnormalised: the 32nd of a month is the 1st of the next). Where a
// daylight-saving change skips midnight, the day begins at the change.
func startOfDay(y int, m time.Month, d int, loc *time.Location) time.Time {
	t := time.Date(y, m, d, 0, 0, 0, 0, loc)
	want := time.Date(y, m, d, 0, 0, 0, 0, time.UTC)
	got := time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, time.UTC)
	if got.Before(want) {
		// Midnight does not exist that day and time.Date chose an instant
		// of the day before: the day begins where that zone ends.
		_, end := t.ZoneBounds()
		if !end.IsZero() {
			return end
		}
	}
	return t
}

// loadLocation reads an IANA time zone, refusing the names that are not
// one: "Local" (whatever the host is set to) and "" (UTC by another name).
func loadLocation(name string) (*time.Location, error) {
	if name == "" || name == "Local" {
		return nil, fmt.Errorf("%q is not an IANA time zone name such as Europe/Paris", name)
	}
	loc, err := time.LoadLocation(name)
	if err != nil {
		return nil, fmt.Errorf("%q is not an IANA time zone name such as Europe/Paris", name)
	}
	return loc, nil
}
