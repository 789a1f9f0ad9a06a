package catalog

import (
	"fmt"
	"net/http"
	"sort"

	"github.com/julienschmidt/httprouter"

	"holon.dev/holon"
	"holon.dev/holon/appliance/auth"
	"holon.dev/holon/appliance/web"
	"holon.dev/holon/gateway"
	"holon.dev/holon/gateway/contract"
	"holon.dev/holon/journal"
)

// Catalogue paging: GET /v0/catalog answers at most catalogMaxLimit agents
// a page (catalogDefaultLimit unless asked), so that its cost does not grow
// with the registry.
const (
	catalogDefaultLimit = 50
	catalogMaxLimit     = 200
)

// attestedNotEnforced labels what a remote agent declares about its data:
// it runs on its author's server, where the gateway cannot check it.
const attestedNotEnforced = "attested, not enforced"

// catalogEntry is one agent in the public catalogue: what its author
// declares, and what the platform measured.
type catalogEntry struct {
	ID       string          `json:"id"`
	Version  string          `json:"version"`
	Declared catalogDeclared `json:"declared"`
	Measured catalogMeasured `json:"measured"`
	// Sample is the shipped sample record (HOLON_RECORDS=1), never mixed
	// into Measured: a sample is not a measurement.
	Sample *sampleRecord `json:"sample,omitempty"`
}

type catalogDeclared struct {
	Summary      string           `json:"summary"`
	Capabilities []string         `json:"capabilities"`
	Pricing      contract.Pricing `json:"pricing"`
	WorstCase    journal.Amount   `json:"worst_case"`
	Currency     string           `json:"currency"`
	License      string           `json:"license"`
	// Proprietary labels an agent without source to check.
	Proprietary bool             `json:"proprietary"`
	Source      *contract.Source `json:"source,omitempty"`
	ForkOf      string           `json:"fork_of,omitempty"`
	Runtime     string           `json:"runtime"`
	// Shipped: the agent comes with the gateway; Published: an account
	// listed it.
	Shipped   bool                 `json:"shipped"`
	Published bool                 `json:"published"`
	Data      *contract.DataPolicy `json:"data,omitempty"`
	// DataPolicy says how far the data policy holds: "attested, not
	// enforced" for remote runtimes, whose servers the gateway cannot see.
	DataPolicy string `json:"data_policy"`
}

type catalogMeasured struct {
	Runs      int64 `json:"runs"`
	Succeeded int64 `json:"succeeded"`
	// SuccessRate is succeeded/runs as a decimal ("0.9500"), null before
	// the first run.
	SuccessRate *string `json:"success_rate"`
	// LatencyMS are upper bounds of the histogram buckets holding the
	// median and the 95th percentile of settled runs (-1: slower than the
	// last bound), null before the first settled run.
	LatencyMS *latencyView `json:"latency_ms"`
	// Evaluated is "9/10 public, 4/5 hidden" (null: never evaluated);
	// Evaluation its detail, hidden cases as counts only.
	Evaluated  *string         `json:"evaluated"`
	Evaluation *evaluationView `json:"evaluation"`
}

type latencyView struct {
	P50 int64 `json:"p50"`
	P95 int64 `json:"p95"`
}

// evaluationView is an evaluation as the public sees it: counts only.
type evaluationView struct {
	Passed   bool            `json:"passed"`
	Finished string          `json:"finished"`
	Error    string          `json:"error,omitempty"`
	Queued   bool            `json:"queued"`
	Suites   []suiteCountsVw `json:"suites"`
}

type suiteCountsVw struct {
	Capability string     `json:"capability"`
	Version    string     `json:"version"`
	Public     CaseCounts `json:"public"`
	Hidden     CaseCounts `json:"hidden"`
}

// catalog is GET /v0/catalog[?q=&capability=&after=&limit=]: every listed
// agent (its highest release) in id order, a page at a time; next is the
// cursor of the following page ("" at the end).
func (l *Catalog) catalog(w http.ResponseWriter, r *http.Request, _ httprouter.Params, _ *auth.Principal) {
	q := r.URL.Query()
	limit, err := web.Limit(r, catalogDefaultLimit, catalogMaxLimit)
	if err != nil {
		web.Fail(l.log, w, r, err)
		return
	}
	match := gateway.AgentQuery{Text: q.Get("q"), Capability: q.Get("capability")}.Matcher()
	after := q.Get("after")
	all := l.engine.Registry().Latest() // in id order
	start := sort.Search(len(all), func(i int) bool { return all[i].Manifest.ID > after })
	var page []*gateway.AgentVersion
	next := ""
	for _, v := range all[start:] {
		if !match(v) {
			continue
		}
		if len(page) == limit {
			next = page[len(page)-1].Manifest.ID
			break
		}
		page = append(page, v)
	}
	out := make([]catalogEntry, 0, len(page))
	err = l.engine.Store().View(func(tx holon.Tx) error {
		for _, v := range page {
			e, err := l.entry(tx, v)
			if err != nil {
				return err
			}
			out = append(out, e)
		}
		return nil
	})
	if err != nil {
		web.Fail(l.log, w, r, err)
		return
	}
	web.JSON(w, http.StatusOK, map[string]any{"agents": out, "next": next})
}

// entry builds one version's catalogue entry from its counters.
func (l *Catalog) entry(tx holon.Tx, v *gateway.AgentVersion) (catalogEntry, error) {
	m := v.Manifest
	e := catalogEntry{ID: m.ID, Version: m.Version, Declared: declared(v)}
	rec, err := tx.Record(m.Ref())
	if err != nil {
		return e, err
	}
	lat, err := tx.Latency(m.Ref())
	if err != nil {
		return e, err
	}
	e.Measured = catalogMeasured{Runs: rec.Runs, Succeeded: rec.Succeeded, SuccessRate: successRate(rec)}
	if lat.Runs() > 0 {
		e.Measured.LatencyMS = &latencyView{P50: lat.Quantile(0.50), P95: lat.Quantile(0.95)}
	}
	res, err := l.evals.result(tx, m.Ref())
	if err != nil {
		return e, err
	}
	queued := l.evals.queued(tx, m.Ref())
	if res != nil || queued {
		e.Measured.Evaluation = publicEvaluation(res, queued)
	}
	if res != nil {
		s := evaluatedLine(res)
		e.Measured.Evaluated = &s
	}
	if s, ok := l.samples[m.Ref()]; ok {
		e.Sample = &s
	}
	return e, nil
}

func declared(v *gateway.AgentVersion) catalogDeclared {
	m := v.Manifest
	d := catalogDeclared{Summary: m.Summary, Capabilities: m.Capabilities, Pricing: m.Pricing,
		WorstCase: m.WorstCase(), Currency: m.Currency(), License: m.License,
		Proprietary: m.License == contract.LicenseProprietary, Source: m.Source, ForkOf: m.ForkOf(),
		Runtime: m.Runtime.Kind, Shipped: v.Shipped, Published: v.Facts.Published, Data: m.Data,
		DataPolicy: "runs inside the gateway: its code ships with it"}
	if d.Capabilities == nil {
		d.Capabilities = []string{}
	}
	if m.Runtime.Kind != contract.RuntimeDev {
		d.DataPolicy = attestedNotEnforced
	}
	return d
}

// successRate is succeeded/runs to four decimals, rounded down (no float).
func successRate(rec holon.Record) *string {
	if rec.Runs == 0 {
		return nil
	}
	bp := rec.Succeeded * 10000 / rec.Runs
	s := fmt.Sprintf("%d.%04d", bp/10000, bp%10000)
	return &s
}

// evaluatedLine is the catalogue's one-line evaluation: "9/10 public,
// 4/5 hidden" over every suite the version was run on.
func evaluatedLine(res *EvalResult) string {
	var pub, hid CaseCounts
	for _, s := range res.Suites {
		pub.Passed += s.Public.Passed
		pub.Failed += s.Public.Failed
		hid.Passed += s.Hidden.Passed
		hid.Failed += s.Hidden.Failed
	}
	line := fmt.Sprintf("%d/%d public, %d/%d hidden", pub.Passed, pub.Passed+pub.Failed, hid.Passed, hid.Passed+hid.Failed)
	if res.Error != "" {
		line += " (" + res.Error + ")"
	}
	return line
}

// publicEvaluation is an evaluation with every case reduced to counts.
func publicEvaluation(res *EvalResult, queued bool) *evaluationView {
	ev := &evaluationView{Queued: queued, Suites: []suiteCountsVw{}}
	if res == nil {
		return ev
	}
	ev.Passed, ev.Error = res.Passed, res.Error
	ev.Finished = res.Finished.Format("2006-01-02T15:04:05Z07:00")
	for _, s := range res.Suites {
		ev.Suites = append(ev.Suites, suiteCountsVw{Capability: s.Capability, Version: s.Version, Public: s.Public, Hidden: s.Hidden})
	}
	return ev
}
