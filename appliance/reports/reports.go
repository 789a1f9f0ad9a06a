// Package reports is the room of the spend and earnings reports:
// GET /v0/reports/spend for payers and GET /v0/reports/earnings for
// authors, answered from the rollups the engine keeps as calls settle
// (gateway.Engine.SpendReport), as JSON or CSV.
package reports

import (
	"log/slog"
	"net/http"
	"net/url"
	"slices"

	"github.com/julienschmidt/httprouter"

	"holon.dev/holon"
	"holon.dev/holon/appliance/auth"
	"holon.dev/holon/appliance/token"
	"holon.dev/holon/appliance/web"
	"holon.dev/holon/appliance/wire"
	"holon.dev/holon/gateway"
)

// DefaultDays is a report's range when from is left out: the 30 days to
// to (today, UTC, when to is left out too).
const DefaultDays = 30

// Routes serves the reports.
type Routes struct {
	Engine *gateway.Engine
	Log    *slog.Logger
}

// Mount registers the routes:
//
//	GET /v0/reports/spend      human key (its own account) or operator (?account=)
//	GET /v0/reports/earnings   human key (its own versions) or operator (?account=)
func (rt Routes) Mount(m *auth.Mount) {
	m.Handle("GET", "/v0/reports/spend", auth.Human|auth.Operator, rt.spend)
	m.Handle("GET", "/v0/reports/earnings", auth.Human|auth.Operator, rt.earnings)
}

func (rt Routes) spend(w http.ResponseWriter, r *http.Request, _ httprouter.Params, p *auth.Principal) {
	rt.serve(w, r, p, false)
}

func (rt Routes) earnings(w http.ResponseWriter, r *http.Request, _ httprouter.Params, p *auth.Principal) {
	rt.serve(w, r, p, true)
}

// query is a report's parameters, read and checked.
type query struct {
	account, by, mandate string
	from, to             holon.Day
	csv                  bool
}

func (rt Routes) serve(w http.ResponseWriter, r *http.Request, p *auth.Principal, earnings bool) {
	q, err := rt.parse(r.URL.Query(), p, earnings)
	if err != nil {
		web.Fail(rt.Log, w, r, err)
		return
	}
	var rep *gateway.Report
	if earnings {
		rep, err = rt.Engine.EarningsReport(q.account, q.by, q.from, q.to)
	} else {
		rep, err = rt.Engine.SpendReport(q.account, q.by, q.mandate, q.from, q.to)
	}
	if err != nil {
		web.Fail(rt.Log, w, r, err)
		return
	}
	out := Wire(q.account, q.mandate, rep)
	if q.csv {
		writeCSV(w, out)
		return
	}
	web.JSON(w, http.StatusOK, out)
}

func (rt Routes) parse(v url.Values, p *auth.Principal, earnings bool) (query, error) {
	q := query{by: v.Get("by"), mandate: v.Get("mandate")}
	for name := range v {
		if !slices.Contains([]string{"by", "from", "to", "format", "account", "mandate"}, name) || (earnings && name == "mandate") {
			return q, holon.Errorf(holon.CodeInvalidReport, "unknown parameter %s", name)
		}
	}
	if q.by == "" {
		q.by = "day"
	}
	switch f := v.Get("format"); f {
	case "", "json":
	case "csv":
		q.csv = true
	default:
		return q, holon.Errorf(holon.CodeInvalidReport, "format must be json or csv, not %q", f)
	}
	q.account = v.Get("account")
	if p.Kind == token.KindHuman {
		if q.account != "" && q.account != p.Account {
			return q, web.NotFound("no account %s", q.account)
		}
		q.account = p.Account
	} else if q.account == "" {
		return q, holon.Errorf(holon.CodeInvalidReport, "account is required: the handle whose report to read")
	}
	if q.mandate != "" {
		if q.by != "day" {
			return q, holon.Errorf(holon.CodeInvalidReport, "mandate narrows a report by day only, not by %s", q.by)
		}
		if p.Kind != auth.KindAdmin && !p.SeesMandate(q.mandate) {
			return q, web.NotFound("no mandate %s", q.mandate)
		}
	}
	today := holon.DayOf(rt.Engine.Now())
	q.to = today
	if s := v.Get("to"); s != "" {
		d, err := holon.ParseDay(s)
		if err != nil {
			return q, holon.Errorf(holon.CodeInvalidReport, "to: %v", err)
		}
		q.to = d
	}
	q.from = q.to - DefaultDays + 1
	if s := v.Get("from"); s != "" {
		d, err := holon.ParseDay(s)
		if err != nil {
			return q, holon.Errorf(holon.CodeInvalidReport, "from: %v", err)
		}
		q.from = d
	}
	return q, gateway.CheckReportRange(q.from, q.to)
}

// Wire is a report as the API answers it.
func Wire(account, mandate string, rep *gateway.Report) wire.Report {
	out := wire.Report{Account: account, By: rep.By, From: rep.From.String(), To: rep.To.String(), Mandate: mandate,
		Rows: make([]wire.ReportRow, 0, len(rep.Rows)), Totals: []wire.ReportRow{}}
	for _, row := range rep.Rows {
		out.Rows = append(out.Rows, wireRow(row.Group, row.Currency, row.Tally))
	}
	totals := rep.Totals()
	curs := make([]string, 0, len(totals))
	for c := range totals {
		curs = append(curs, c)
	}
	slices.Sort(curs)
	for _, c := range curs {
		out.Totals = append(out.Totals, wireRow("", c, totals[c]))
	}
	return out
}

func wireRow(group, currency string, t holon.Tally) wire.ReportRow {
	return wire.ReportRow{Group: group, Currency: currency, Calls: t.Calls, Charged: wire.Money(t.Amount),
		Refunded: wire.Money(t.Refunded), Net: wire.Money(t.Net())}
}

// writeCSV answers the report as CSV.
func writeCSV(w http.ResponseWriter, rep wire.Report) {
	w.Header().Set("Content-Type", "text/csv; charset=utf-8")
	w.Header().Set("Content-Disposition", `attachment; filename="`+rep.Account+"-"+rep.By+"-"+rep.From+"-"+rep.To+`.csv"`)
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusOK)
	_ = rep.WriteCSV(w)
}
