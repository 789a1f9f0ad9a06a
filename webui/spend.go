package webui

import (
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"holon.dev/holon/appliance/wire"
	"holon.dev/holon/gateway"
)

// The spend page: what an account paid per day, per mandate over time
// with each mandate's current budget, and for an author what its versions
// earned, drawn as server-rendered SVG charts (no script), each with a
// table of the same numbers beside it. It reads the reports API
// (GET /v0/reports/spend and /v0/reports/earnings), as the signed-in
// principal.

// spendDays are the ranges the page offers, in days to today (UTC).
var spendDays = []int{7, 30, 90}

// maxMandateCharts bounds the mandates drawn over time (those that spent
// most in the range).
const maxMandateCharts = 6

type spendPage struct {
	Account string
	// AskAccount: the operator (or a dev gateway with no mandate) names
	// the account to read.
	AskAccount bool
	Days       int
	DayChoices []int
	From, To   string
	// Daily is the account's spend per day, one chart per currency.
	Daily []chart
	// Mandates are the mandates that spent in the range, each drawn
	// per day, with its budget now.
	Mandates []mandateSpend
	// Earnings are the author's versions' earnings in the range, per
	// version, one chart per currency (empty when it earned nothing).
	Earnings []chart
	// CSV links the reports behind the charts.
	CSV map[string]string
}

type mandateSpend struct {
	ID    string
	State *gateway.MandateState
	Chart []chart
}

// chart is one SVG chart and its table: bars per day (Columns) or per
// item (Rows, horizontal).
type chart struct {
	ID, Title, Currency string
	Horizontal          bool
	Bars                []chartBar
	// Max is the largest value, the scale's top; Ticks are the labels
	// of the time axis.
	Max    string
	Ticks  []chartTick
	Width  int
	Height int
	// Rows are the numbers, for the table.
	Rows  []wire.ReportRow
	Total wire.ReportRow
}

type chartBar struct {
	X, Y, W, H int
	Label      string
	Value      string
	// LabelX, ValueX and TextY place a horizontal bar's texts.
	LabelX, ValueX, TextY int
}

type chartTick struct {
	X     int
	Label string
}

// Chart geometry, in SVG user units.
const (
	chartW     = 720
	chartH     = 180
	chartTop   = 10
	chartLeft  = 8
	barRowH    = 22
	barLabelW  = 260
	barMaxW    = chartW - barLabelW - 80
	chartAxisH = 24
)

func (c *Console) spend(w http.ResponseWriter, r *http.Request, v Viewer) {
	q := r.URL.Query()
	p := spendPage{Days: 30, DayChoices: spendDays, CSV: map[string]string{}}
	if d, err := strconv.Atoi(q.Get("days")); err == nil && slices.Contains(spendDays, d) {
		p.Days = d
	}
	switch v.Kind {
	case ViewerHuman:
		p.Account = v.Account
	default:
		p.Account = strings.TrimSpace(q.Get("account"))
		if p.Account == "" && v.Kind == ViewerDev {
			var ms struct {
				Mandates []*gateway.MandateState `json:"mandates"`
			}
			if err := c.b.Do(r, "GET", "/v0/mandates", nil, &ms); err != nil {
				c.fail(w, r, v, err)
				return
			}
			if len(ms.Mandates) > 0 {
				p.Account = ms.Mandates[0].Mandate.Issuer
			}
		}
	}
	p.AskAccount = v.Kind != ViewerHuman
	if p.Account == "" {
		c.render(w, r, v, http.StatusOK, "spend", p)
		return
	}
	range_ := url.Values{}
	if v.Kind != ViewerHuman {
		range_.Set("account", p.Account)
	}
	// Today is the gateway's (the report's default to), not this
	// process's clock.
	var today wire.Report
	if err := c.b.Do(r, "GET", "/v0/reports/spend?"+range_.Encode(), nil, &today); err != nil {
		c.fail(w, r, v, err)
		return
	}
	to, err := time.Parse(time.DateOnly, today.To)
	if err != nil {
		c.fail(w, r, v, err)
		return
	}
	from := to.AddDate(0, 0, -(p.Days - 1))
	p.From, p.To = from.Format(time.DateOnly), today.To
	range_.Set("from", p.From)
	range_.Set("to", p.To)
	report := func(path string, extra url.Values) (wire.Report, error) {
		vals := url.Values{}
		for k, vs := range range_ {
			vals[k] = vs
		}
		for k, vs := range extra {
			vals[k] = vs
		}
		var rep wire.Report
		err := c.b.Do(r, "GET", path+"?"+vals.Encode(), nil, &rep)
		return rep, err
	}
	daily, err := report("/v0/reports/spend", url.Values{"by": {"day"}})
	if err != nil {
		c.fail(w, r, v, err)
		return
	}
	p.Daily = dayCharts("spend", "Spend per day", daily, from, p.Days)
	p.CSV["day"] = spendCSVLink(p, "spend", "day")
	p.CSV["mandate"] = spendCSVLink(p, "spend", "mandate")
	byMandate, err := report("/v0/reports/spend", url.Values{"by": {"mandate"}})
	if err != nil {
		c.fail(w, r, v, err)
		return
	}
	for i, id := range topGroups(byMandate, maxMandateCharts) {
		rep, err := report("/v0/reports/spend", url.Values{"by": {"day"}, "mandate": {id}})
		if err != nil {
			c.fail(w, r, v, err)
			return
		}
		ms := mandateSpend{ID: id, Chart: dayCharts(fmt.Sprintf("mandate-%d", i), "Spend per day under "+id, rep, from, p.Days)}
		ns, name, _ := strings.Cut(id, "/")
		var st gateway.MandateState
		if err := c.b.Do(r, "GET", apiPath("/v0/mandates", ns, name), nil, &st); err == nil {
			ms.State = &st
		}
		p.Mandates = append(p.Mandates, ms)
	}
	earnings, err := report("/v0/reports/earnings", url.Values{"by": {"version"}})
	if err != nil {
		c.fail(w, r, v, err)
		return
	}
	p.Earnings = itemCharts("earnings", "Earnings per version", earnings)
	p.CSV["earnings"] = spendCSVLink(p, "earnings", "version")
	c.render(w, r, v, http.StatusOK, "spend", p)
}

// spendCSVLink is the console's CSV export of one of the page's reports.
func spendCSVLink(p spendPage, report, by string) string {
	vals := url.Values{"report": {report}, "by": {by}, "from": {p.From}, "to": {p.To}}
	if p.AskAccount {
		vals.Set("account", p.Account)
	}
	return Prefix + "/spend.csv?" + vals.Encode()
}

// topGroups are the report's groups with the largest net, at most n.
func topGroups(rep wire.Report, n int) []string {
	net := map[string]wire.Money{}
	for _, row := range rep.Rows {
		net[row.Group] += row.Charged
	}
	groups := make([]string, 0, len(net))
	for g := range net {
		groups = append(groups, g)
	}
	slices.SortFunc(groups, func(a, b string) int {
		if net[a] != net[b] {
			if net[a] > net[b] {
				return -1
			}
			return 1
		}
		return strings.Compare(a, b)
	})
	return groups[:min(n, len(groups))]
}

// currencies lists a report's currencies, in order.
func currencies(rep wire.Report) []string {
	var out []string
	for _, row := range rep.Rows {
		if !slices.Contains(out, row.Currency) {
			out = append(out, row.Currency)
		}
	}
	slices.Sort(out)
	return out
}

// dayCharts draws a by-day report as one column per day of the range
// (days with nothing at zero), one chart per currency; the bar is what
// the day's calls were charged.
func dayCharts(id, title string, rep wire.Report, from time.Time, days int) []chart {
	var out []chart
	for ci, cur := range currencies(rep) {
		ch := chart{ID: fmt.Sprintf("%s-%d", id, ci), Title: title, Currency: cur, Width: chartW, Height: chartTop + chartH + chartAxisH}
		byDay := map[string]wire.ReportRow{}
		var top wire.Money
		for _, row := range rep.Rows {
			if row.Currency == cur {
				byDay[row.Group] = row
				top = max(top, row.Charged)
				ch.Rows = append(ch.Rows, row)
			}
		}
		for _, t := range rep.Totals {
			if t.Currency == cur {
				ch.Total = t
			}
		}
		ch.Max = top.String()
		slot := (chartW - 2*chartLeft) / days
		for d := range days {
			day := from.AddDate(0, 0, d).Format(time.DateOnly)
			row := byDay[day]
			h := 0
			if top > 0 {
				h = int(int64(row.Charged) * chartH / int64(top))
			}
			if row.Charged > 0 && h == 0 {
				h = 1
			}
			x := chartLeft + d*slot
			ch.Bars = append(ch.Bars, chartBar{X: x + slot/8, Y: chartTop + chartH - h, W: max(slot-slot/4, 1), H: h, Label: day, Value: row.Charged.String()})
			if d%max(days/6, 1) == 0 {
				ch.Ticks = append(ch.Ticks, chartTick{X: x + slot/2, Label: day[5:]})
			}
		}
		out = append(out, ch)
	}
	return out
}

// itemCharts draws a report by item (version) as horizontal bars of what
// each earned, one chart per currency.
func itemCharts(id, title string, rep wire.Report) []chart {
	var out []chart
	for ci, cur := range currencies(rep) {
		ch := chart{ID: fmt.Sprintf("%s-%d", id, ci), Title: title, Currency: cur, Horizontal: true, Width: chartW}
		var top wire.Money
		for _, row := range rep.Rows {
			if row.Currency == cur {
				ch.Rows = append(ch.Rows, row)
				top = max(top, row.Charged)
			}
		}
		for _, t := range rep.Totals {
			if t.Currency == cur {
				ch.Total = t
			}
		}
		ch.Max = top.String()
		for i, row := range ch.Rows {
			wdt := 0
			if top > 0 {
				wdt = int(int64(row.Charged) * barMaxW / int64(top))
			}
			y := chartTop + i*barRowH
			ch.Bars = append(ch.Bars, chartBar{X: barLabelW, Y: y, W: wdt, H: barRowH - 6, Label: row.Group, Value: row.Charged.String(),
				LabelX: barLabelW - 8, ValueX: barLabelW + wdt + 6, TextY: y + 12})
		}
		ch.Height = chartTop + len(ch.Rows)*barRowH + 4
		out = append(out, ch)
	}
	return out
}

// spendCSV is a report of the spend page as CSV: spend by day or
// mandate, or earnings by version, over the page's range (the API checks
// the parameters).
func (c *Console) spendCSV(w http.ResponseWriter, r *http.Request, v Viewer) {
	q := r.URL.Query()
	vals := url.Values{"from": {q.Get("from")}, "to": {q.Get("to")}, "by": {q.Get("by")}}
	if v.Kind != ViewerHuman {
		vals.Set("account", q.Get("account"))
	}
	path := "/v0/reports/spend"
	if q.Get("report") == "earnings" {
		path = "/v0/reports/earnings"
	}
	var rep wire.Report
	if err := c.b.Do(r, "GET", path+"?"+vals.Encode(), nil, &rep); err != nil {
		c.fail(w, r, v, err)
		return
	}
	w.Header().Set("Content-Type", "text/csv; charset=utf-8")
	w.Header().Set("Content-Disposition", `attachment; filename="`+strings.TrimPrefix(path, "/v0/reports/")+"-"+rep.By+".csv\"")
	if err := rep.WriteCSV(w); err != nil {
		c.log.Error("spend export", "err", err)
	}
}
