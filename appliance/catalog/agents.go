package catalog

import (
	"net/http"

	"github.com/julienschmidt/httprouter"

	"holon.dev/holon"
	"holon.dev/holon/appliance/auth"
	"holon.dev/holon/appliance/token"
	"holon.dev/holon/appliance/web"
	"holon.dev/holon/appliance/wire"
	"holon.dev/holon/gateway"
)

// listAgents is GET /v0/agents[?q=&capability=&mandate=&limit=&cursor=]:
// Engine.ListAgents, a page at a time; next is the cursor of the page
// after ("" at the end).
func (l *Catalog) listAgents(w http.ResponseWriter, r *http.Request, _ httprouter.Params, p *auth.Principal) {
	qs := r.URL.Query()
	limit, err := web.Limit(r, gateway.DefaultAgentLimit, gateway.MaxAgentLimit)
	if err != nil {
		web.Fail(l.log, w, r, err)
		return
	}
	q := gateway.AgentQuery{Text: qs.Get("q"), Capability: qs.Get("capability"), Mandate: qs.Get("mandate"),
		Limit: limit, Cursor: qs.Get("cursor")}
	if q.Mandate == "" && p.Kind == token.KindAgent {
		q.Mandate = p.Mandate // an agent searches under its one mandate
	}
	if q.Mandate != "" {
		if p.Kind == auth.KindNone {
			web.Fail(l.log, w, r, holon.Errorf(web.CodeUnauthenticated, "listing under a mandate needs that mandate's key: send Authorization: Bearer <key>"))
			return
		}
		if !p.SeesMandate(q.Mandate) {
			web.Fail(l.log, w, r, web.NotFound("no mandate %s", q.Mandate))
			return
		}
	}
	page, err := l.engine.ListAgents(r.Context(), q)
	if err != nil {
		web.Fail(l.log, w, r, err)
		return
	}
	out := make([]wire.Agent, 0, len(page.Agents))
	for _, l := range page.Agents {
		m := l.Version.Manifest
		av := wire.Agent{ID: m.ID, Version: m.Version, Summary: m.Summary, Capabilities: m.Capabilities,
			License: m.License, Pricing: m.Pricing, WorstCase: l.WorstCase, Currency: l.Currency,
			Record: wire.AgentRecord{Runs: l.Record.Runs, Succeeded: l.Record.Succeeded}, Denied: l.Denied, Proprietary: !m.OpenSource()}
		if av.Capabilities == nil {
			av.Capabilities = []string{}
		}
		out = append(out, av)
	}
	web.JSON(w, http.StatusOK, map[string]any{"agents": out, "total": page.Total, "next": page.Next,
		"capabilities": page.Capabilities})
}

// getAgent is GET /v0/agents/{ns}/{name}: the manifest of the version
// the reference resolves to, its record and every version listed.
func (l *Catalog) getAgent(w http.ResponseWriter, r *http.Request, ps httprouter.Params, _ *auth.Principal) {
	ref := ps.ByName("ns") + "/" + ps.ByName("name")
	v, err := l.engine.Registry().Resolve(ref)
	if err != nil {
		web.Fail(l.log, w, r, err)
		return
	}
	rec, err := l.engine.Record(v.Manifest.Ref())
	if err != nil {
		web.Fail(l.log, w, r, err)
		return
	}
	d := wire.AgentDetail{Manifest: v.Manifest, Record: rec, Versions: []string{}}
	for _, x := range l.engine.Registry().Versions(v.Manifest.ID) {
		d.Versions = append(d.Versions, x.Manifest.Version)
	}
	web.JSON(w, http.StatusOK, d)
}
