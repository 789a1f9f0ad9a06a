package console

import (
	"net/http"
	"sort"
	"strings"

	"github.com/julienschmidt/httprouter"

	"holon.dev/holon"
	"holon.dev/holon/appliance/auth"
	"holon.dev/holon/appliance/ops"
	"holon.dev/holon/appliance/web"
	"holon.dev/holon/gateway"
)

// devMandates is GET /v0/mandates on a dev gateway: every root mandate
// with its budget (a hosted gateway lists the account's own).
func (b *Backend) devMandates(w http.ResponseWriter, r *http.Request, _ httprouter.Params, _ *auth.Principal) {
	var ids []string
	err := b.cfg.Engine.Store().View(func(tx holon.Tx) error {
		return tx.ForEachMandate(func(id string, _ holon.Doc) error {
			if i := strings.LastIndex(id, ".r"); i < 0 || !auth.DerivedFrom(id, id[:i]) {
				ids = append(ids, id)
			}
			return nil
		})
	})
	if err != nil {
		b.fail(w, r, err)
		return
	}
	sort.Strings(ids)
	all, err := b.cfg.MandateStates(ids)
	if err != nil {
		b.fail(w, r, err)
		return
	}
	out := []*gateway.MandateState{}
	for _, st := range all {
		if st.Mandate.Parent == "" {
			out = append(out, st)
		}
	}
	web.JSON(w, http.StatusOK, map[string]any{"mandates": out})
}

// healthView is GET /v0/admin/health: the store's size and write path.
type healthView struct {
	SizeBytes int64   `json:"size_bytes"`
	Commits   uint64  `json:"commits"`
	Updates   uint64  `json:"updates"`
	MeanBatch float64 `json:"mean_batch"`
	MaxBatch  int     `json:"max_batch"`
	HoldsOpen int     `json:"holds_open"`
	Receipts  uint64  `json:"receipts"`
}

func (b *Backend) storeHealth(w http.ResponseWriter, r *http.Request, _ httprouter.Params, _ *auth.Principal) {
	s := b.cfg.Engine.Store()
	st := s.Stats()
	hv := healthView{SizeBytes: st.SizeBytes, Commits: st.Commits, Updates: st.Updates, MaxBatch: st.MaxBatch}
	if st.Commits > 0 {
		hv.MeanBatch = float64(st.Updates) / float64(st.Commits)
	}
	err := s.View(func(tx holon.Tx) error {
		hv.Receipts = tx.Counter("receipts")
		return nil
	})
	if err == nil {
		hv.HoldsOpen, err = ops.HoldsOpen(s, b.cfg.Engine.InFlight)
	}
	if err != nil {
		b.fail(w, r, err)
		return
	}
	web.JSON(w, http.StatusOK, hv)
}
