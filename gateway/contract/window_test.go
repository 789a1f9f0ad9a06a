package contract_test

import (
	"errors"
	"strings"
	"testing"
	"time"
	_ "time/tzdata" // the same zones on every host

	"holon.dev/holon"
	"holon.dev/holon/gateway/contract"
	"holon.dev/holon/journal"
)

// Ensure that windows begin at local midnight and end where the next
// begins, across daylight-saving changes: a day of 23 hours and one of 25
// in Paris, a day whose midnight does not exist in Santiago, and weeks and
// months that hold a change.
func TestWindowAt_Boundaries(t *testing.T) {
	for _, tt := range []struct {
		name, kind, zone, at string // at: RFC 3339
		key, start, end      string
		hours                float64
	}{
		{name: "a plain UTC day", kind: "day", zone: "UTC", at: "2026-12-02T10:00:00Z",
			key: "day:2026-12-02", start: "2026-12-02T00:00:00Z", end: "2026-12-03T00:00:00Z", hours: 24},
		{name: "the last instant of a day", kind: "day", zone: "UTC", at: "2026-12-02T23:59:59.999999999Z",
			key: "day:2026-12-02", start: "2026-12-02T00:00:00Z", end: "2026-12-03T00:00:00Z", hours: 24},
		{name: "the first instant of the next", kind: "day", zone: "UTC", at: "2026-12-03T00:00:00Z",
			key: "day:2026-12-03", start: "2026-12-03T00:00:00Z", end: "2026-12-04T00:00:00Z", hours: 24},
		{name: "Paris, spring forward: 23 hours", kind: "day", zone: "Europe/Paris", at: "2026-03-29T12:00:00+02:00",
			key: "day:2026-03-29", start: "2026-03-29T00:00:00+01:00", end: "2026-03-30T00:00:00+02:00", hours: 23},
		{name: "Paris, fall back: 25 hours", kind: "day", zone: "Europe/Paris", at: "2026-10-25T02:30:00+01:00",
			key: "day:2026-10-25", start: "2026-10-25T00:00:00+02:00", end: "2026-10-26T00:00:00+01:00", hours: 25},
		{name: "Paris, 23:30 UTC is already tomorrow", kind: "day", zone: "Europe/Paris", at: "2026-12-02T23:30:00Z",
			key: "day:2026-12-03", start: "2026-12-03T00:00:00+01:00", end: "2026-12-04T00:00:00+01:00", hours: 24},
		{name: "Santiago, midnight skipped: the day begins at 01:00", kind: "day", zone: "America/Santiago", at: "2026-09-06T12:00:00-03:00",
			key: "day:2026-09-06", start: "2026-09-06T01:00:00-03:00", end: "2026-09-07T00:00:00-03:00", hours: 23},
		{name: "Santiago, the day before ends at the skip", kind: "day", zone: "America/Santiago", at: "2026-09-05T23:59:00-04:00",
			key: "day:2026-09-05", start: "2026-09-05T00:00:00-04:00", end: "2026-09-06T01:00:00-03:00", hours: 24},
		{name: "a week holding a change, Monday to Monday", kind: "week", zone: "Europe/Paris", at: "2026-10-28T09:00:00+01:00",
			key: "week:2026-10-26", start: "2026-10-26T00:00:00+01:00", end: "2026-11-02T00:00:00+01:00", hours: 168},
		{name: "a week across the change", kind: "week", zone: "Europe/Paris", at: "2026-10-25T09:00:00+01:00",
			key: "week:2026-10-19", start: "2026-10-19T00:00:00+02:00", end: "2026-10-26T00:00:00+01:00", hours: 169},
		{name: "a Sunday belongs to the week before", kind: "week", zone: "UTC", at: "2026-12-06T23:00:00Z",
			key: "week:2026-11-30", start: "2026-11-30T00:00:00Z", end: "2026-12-07T00:00:00Z", hours: 168},
		{name: "a week across a year", kind: "week", zone: "UTC", at: "2027-01-01T12:00:00Z",
			key: "week:2026-12-28", start: "2026-12-28T00:00:00Z", end: "2027-01-04T00:00:00Z", hours: 168},
		{name: "March in Paris", kind: "month", zone: "Europe/Paris", at: "2026-03-31T23:00:00+02:00",
			key: "month:2026-03", start: "2026-03-01T00:00:00+01:00", end: "2026-04-01T00:00:00+02:00", hours: 31*24 - 1},
		{name: "December into January", kind: "month", zone: "UTC", at: "2026-12-31T23:59:59Z",
			key: "month:2026-12", start: "2026-12-01T00:00:00Z", end: "2027-01-01T00:00:00Z", hours: 31 * 24},
		{name: "Auckland is a day ahead", kind: "month", zone: "Pacific/Auckland", at: "2026-11-30T12:00:00Z",
			key: "month:2026-12", start: "2026-12-01T00:00:00+13:00", end: "2027-01-01T00:00:00+13:00", hours: 31 * 24},
	} {
		t.Run(tt.name, func(t *testing.T) {
			loc, err := time.LoadLocation(tt.zone)
			if err != nil {
				t.Fatal(err)
			}
			w := contract.WindowAt(tt.kind, loc, mustTime(t, tt.at))
			if w.Key != tt.key || !w.Start.Equal(mustTime(t, tt.start)) || !w.End.Equal(mustTime(t, tt.end)) {
				t.Fatalf("got %s [%s, %s), want %s [%s, %s)", w.Key, w.Start.Format(time.RFC3339), w.End.Format(time.RFC3339), tt.key, tt.start, tt.end)
			}
			if h := w.End.Sub(w.Start).Hours(); h != tt.hours {
				t.Fatalf("the window lasts %v hours, want %v", h, tt.hours)
			}
			// The window holds its first instant and not its end; the next
			// window starts exactly at its end.
			if got := contract.WindowAt(tt.kind, loc, w.Start); got != w {
				t.Fatalf("at its start: %+v", got)
			}
			if got := contract.WindowAt(tt.kind, loc, w.End.Add(-time.Nanosecond)); got.Key != w.Key {
				t.Fatalf("just before its end: %s", got.Key)
			}
			if next := contract.WindowAt(tt.kind, loc, w.End); next.Key == w.Key || !next.Start.Equal(w.End) {
				t.Fatalf("the next window %s starts at %s, want %s", next.Key, next.Start, w.End)
			}
		})
	}
}

// Ensure that walking a whole year hour by hour in a zone with two changes
// visits each day once, in order, with windows that tile the time line.
func TestWindowAt_TileTheYear(t *testing.T) {
	for _, zone := range []string{"Europe/Paris", "America/Santiago", "Australia/Lord_Howe", "UTC"} {
		loc, err := time.LoadLocation(zone)
		if err != nil {
			t.Fatal(err)
		}
		for _, kind := range []string{"day", "week", "month"} {
			t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
			prev := contract.WindowAt(kind, loc, t0)
			windows := 1
			for at := t0; at.Before(t0.AddDate(1, 0, 0)); at = at.Add(17 * time.Minute) {
				w := contract.WindowAt(kind, loc, at)
				if at.Before(w.Start) || !at.Before(w.End) {
					t.Fatalf("%s %s: %s is outside its window [%s, %s)", zone, kind, at, w.Start, w.End)
				}
				if w.Key != prev.Key {
					if !w.Start.Equal(prev.End) {
						t.Fatalf("%s %s: %s starts at %s, the window before ends at %s", zone, kind, w.Key, w.Start, prev.End)
					}
					if w.Key <= prev.Key {
						t.Fatalf("%s %s: window %s after %s", zone, kind, w.Key, prev.Key)
					}
					windows++
					prev = w
				}
			}
			want := map[string]int{"day": 365, "week": 53, "month": 12}[kind]
			if windows < want || windows > want+1 {
				t.Fatalf("%s %s: %d windows in a year", zone, kind, windows)
			}
		}
	}
}

// Ensure that the budget's window fields are checked: a known kind, an
// allowance with it, a real IANA zone, and a total or a window.
func TestMandate_BudgetWindowValidation(t *testing.T) {
	for _, tt := range []struct {
		name, budget string
		path, msg    string // "" path: valid
	}{
		{name: "a total alone", budget: `{total: "5.00"}`},
		{name: "a window alone", budget: `{total: null, window: day, per_window: "1.00"}`},
		{name: "a window in a zone", budget: `{total: null, window: week, per_window: "1.00", timezone: Europe/Paris}`},
		{name: "both", budget: `{total: "50.00", window: month, per_window: "10.00", timezone: America/New_York}`},
		{name: "neither", budget: `{total: null}`, path: "budget.total", msg: "required unless"},
		{name: "an unknown window", budget: `{window: year, per_window: "1.00"}`, path: "budget.window", msg: `"year" is not day, week or month`},
		{name: "a window without its allowance", budget: `{window: day}`, path: "budget.per_window", msg: "required with budget.window"},
		{name: "an allowance without a window", budget: `{per_window: "1.00"}`, path: "budget.per_window", msg: "needs budget.window"},
		{name: "a zone without a window", budget: `{timezone: UTC}`, path: "budget.timezone", msg: "needs budget.window"},
		{name: "a zone that does not exist", budget: `{window: day, per_window: "1.00", timezone: Mars/Olympus}`,
			path: "budget.timezone", msg: "not an IANA time zone"},
		{name: "the host's zone", budget: `{window: day, per_window: "1.00", timezone: Local}`, path: "budget.timezone", msg: "not an IANA time zone"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			doc := overlay(t, baseMandate, "budget: "+tt.budget)
			m, err := contract.ParseMandate(doc)
			if tt.path == "" {
				if err != nil {
					t.Fatalf("refused: %v\n%s", err, doc)
				}
				if m.Windowed() != strings.Contains(tt.budget, "window") {
					t.Fatalf("Windowed() = %v", m.Windowed())
				}
				return
			}
			var he *holon.Error
			if !errors.As(err, &he) || he.Code != holon.CodeInvalidMandate {
				t.Fatalf("got %v, want invalid_mandate", err)
			}
			for _, f := range he.Fields {
				if f.Path == tt.path && strings.Contains(f.Msg, tt.msg) {
					return
				}
			}
			t.Fatalf("fields %+v, want %s: …%s…", he.Fields, tt.path, tt.msg)
		})
	}
}

// Ensure that admission checks the current window exactly as it checks
// the total: spent and reserved in the window plus the worst case may
// reach the allowance and not pass it, and the lifetime total still holds
// beside it.
func TestCheckCall_Window(t *testing.T) {
	a := overlayManifest(t, `pricing: {model: per_run, amount: "0.10", currency: EUR}`)
	now := mustTime(t, "2026-12-02T22:30:00Z")
	for _, tt := range []struct {
		name, budget             string
		wspent, wreserved, spent string
		want                     contract.Verdict
		msg                      string
	}{
		{name: "room in the window", budget: `{total: null, window: day, per_window: "1.00"}`, wspent: "0.80", wreserved: "0.10", want: contract.VerdictAllow},
		{name: "exactly the allowance", budget: `{total: null, window: day, per_window: "1.00"}`, wspent: "0.80", wreserved: "0.10000", want: contract.VerdictAllow},
		{name: "a micro-unit over", budget: `{total: null, window: day, per_window: "1.00"}`, wspent: "0.800001", wreserved: "0.10",
			want: contract.VerdictDeny, msg: "left this day, 0.099999; the budget renews at 2026-12-03T00:00:00+01:00"},
		{name: "reservations count", budget: `{total: null, window: day, per_window: "1.00"}`, wreserved: "0.95",
			want: contract.VerdictDeny, msg: "left this day"},
		{name: "the total still holds", budget: `{total: "5.00", window: day, per_window: "1.00"}`, spent: "4.95",
			want: contract.VerdictDeny, msg: "what the mandate has left, 0.05"},
		{name: "lifetime spent does not count against a window", budget: `{total: null, window: day, per_window: "1.00"}`, spent: "1000.00",
			want: contract.VerdictAllow},
	} {
		t.Run(tt.name, func(t *testing.T) {
			m := overlayMandate(t, "budget: "+tt.budget+"\n")
			m.Budget.Timezone = "Europe/Paris"
			if err := m.Validate(); err != nil {
				t.Fatal(err)
			}
			win, _ := m.WindowAt(now)
			bs := contract.BudgetState{Spent: amt(t, tt.spent), Window: win, WindowSpent: amt(t, tt.wspent), WindowReserved: amt(t, tt.wreserved)}
			d := contract.CheckCall(m, a, contract.AgentFacts{}, bs, contract.CallRequest{Now: now})
			if d.Verdict != tt.want || !strings.Contains(d.Msg, tt.msg) {
				t.Fatalf("got %s %s %q, want %s …%s…", d.Verdict, d.Reason, d.Msg, tt.want, tt.msg)
			}
			if d.Verdict == contract.VerdictDeny && d.Reason != holon.CodeOverBudget {
				t.Fatalf("reason %s, want over_budget", d.Reason)
			}
		})
	}
}

func amt(tb testing.TB, s string) journal.Amount {
	tb.Helper()
	if s == "" {
		return 0
	}
	return amountOf(tb, s)
}

func mustTime(tb testing.TB, s string) time.Time {
	tb.Helper()
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		tb.Fatal(err)
	}
	return t
}
