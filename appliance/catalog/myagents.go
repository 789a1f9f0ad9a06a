package catalog

import (
	"net/http"
	"sort"
	"strings"

	"github.com/julienschmidt/httprouter"

	"holon.dev/holon"
	"holon.dev/holon/appliance/auth"
	"holon.dev/holon/appliance/web"
	"holon.dev/holon/journal"
)

// myVersion is one of an author's versions in GET /v0/me/agents: its
// evaluation (public cases in detail, hidden ones as counts) and what it
// earned, by currency, from the per-version counters the settlements keep.
type myVersion struct {
	Ref       string `json:"ref"`
	ID        string `json:"id"`
	Version   string `json:"version"`
	Listed    bool   `json:"listed"`
	Published bool   `json:"published"`
	// Evaluation is the last one (nil: never evaluated); Queued says one
	// waits or runs.
	Evaluation *EvalResult             `json:"evaluation"`
	Queued     bool                    `json:"evaluation_queued"`
	Earnings   map[string]earningsView `json:"earnings"`
	Record     holon.Record            `json:"record"`
}

// earningsView is what a version earned in one currency.
type earningsView struct {
	PaidCalls int64          `json:"paid_calls"`
	Own       journal.Amount `json:"own"`
	Royalties journal.Amount `json:"royalties"`
	Total     journal.Amount `json:"total"`
}

// myAgents is GET /v0/me/agents (human key): every version in the
// account's namespace that is listed or has earned, in ref order.
func (l *Catalog) myAgents(w http.ResponseWriter, r *http.Request, _ httprouter.Params, p *auth.Principal) {
	ns := p.Account + "/"
	byRef := map[string]*myVersion{}
	for _, latest := range l.engine.Registry().Latest() {
		if !strings.HasPrefix(latest.Manifest.ID, ns) {
			continue
		}
		for _, v := range l.engine.Registry().Versions(latest.Manifest.ID) {
			m := v.Manifest
			byRef[m.Ref()] = &myVersion{Ref: m.Ref(), ID: m.ID, Version: m.Version, Listed: true, Published: v.Facts.Published}
		}
	}
	err := l.engine.Store().View(func(tx holon.Tx) error {
		// Versions no longer listed (yanked) still show what they earned.
		if err := tx.ForEachEarnings(ns, func(ref string, _ holon.Earnings) error {
			if byRef[ref] == nil {
				id, version, _ := strings.Cut(ref, "@")
				byRef[ref] = &myVersion{Ref: ref, ID: id, Version: version}
			}
			return nil
		}); err != nil {
			return err
		}
		for ref, mv := range byRef {
			e, err := tx.Earnings(ref)
			if err != nil {
				return err
			}
			mv.Earnings = map[string]earningsView{}
			for cur, x := range e {
				total, err := x.Own.Add(x.Royalties)
				if err != nil {
					return err
				}
				mv.Earnings[cur] = earningsView{PaidCalls: x.PaidCalls, Own: x.Own, Royalties: x.Royalties, Total: total}
			}
			if mv.Evaluation, err = l.evals.result(tx, ref); err != nil {
				return err
			}
			mv.Queued = l.evals.queued(tx, ref)
			if mv.Record, err = tx.Record(ref); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		web.Fail(l.log, w, r, err)
		return
	}
	out := make([]*myVersion, 0, len(byRef))
	for _, mv := range byRef {
		out = append(out, mv)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Ref < out[j].Ref })
	web.JSON(w, http.StatusOK, map[string]any{"account": p.Account, "versions": out})
}
