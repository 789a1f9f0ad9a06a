package publishing

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"

	"holon.dev/holon"
	"holon.dev/holon/appliance/accounts"
	"holon.dev/holon/gateway"
	"holon.dev/holon/gateway/contract"
)

// Sync keeps the registry in step with the store, on a store several
// gateways share: versions published, versions yanked (by their author,
// by the operator, with a disabled account) and evaluation verdicts that
// other gateways wrote. It remembers the versions it tried to list and
// could not (their lineage), not tried again every pass.
type Sync struct {
	store    holon.Store
	reg      *gateway.Registry
	log      *slog.Logger
	unlisted map[string]bool
	// revision is holon.RegistryRevision as the last whole pass read it
	// (read: that pass ran); a pass that finds it unmoved reads nothing
	// more.
	revision uint64
	read     bool
	// passes counts the whole passes.
	passes int
}

// Passes is how many passes read the registry's rows whole (the others
// found nothing moved).
func (s *Sync) Passes() int { return s.passes }

// NewSync returns the sync of reg with store.
func NewSync(store holon.Store, reg *gateway.Registry, log *slog.Logger) *Sync {
	return &Sync{store: store, reg: reg, log: log, unlisted: map[string]bool{}}
}

// Every runs one pass and logs its error, unless the store is only
// unreachable for now or ctx ended.
func (s *Sync) Every(ctx context.Context) {
	if err := s.Pass(); err != nil && ctx.Err() == nil && holon.ErrorCode(err) != holon.CodeStoreUnavailable {
		s.log.Error("read the registry's changes from the store", "err", err)
	}
}

// Pass reads the published versions, the operator's yanks and the
// evaluations once, and brings the registry in line with them.
func (s *Sync) Pass() error {
	var rev uint64
	if err := s.store.View(func(tx holon.Tx) error { rev = tx.Counter(holon.RegistryRevision); return nil }); err != nil {
		return err
	}
	if s.read && rev == s.revision {
		return nil // nothing published, yanked or evaluated since
	}
	s.passes++
	reg := s.reg
	yanks, err := accounts.YankedRefs(s.store)
	if err != nil {
		return err
	}
	yanked := map[string]bool{}
	for _, ref := range yanks {
		yanked[ref] = true
	}
	var fresh []*contract.Manifest
	var gone []string
	verdicts := map[string]bool{}
	err = s.store.View(func(tx holon.Tx) error {
		err := tx.ForEachAgent(func(ref string, d holon.Doc) error {
			if !d.Published {
				return nil
			}
			_, listed := reg.Get(ref)
			switch {
			case d.Yanked != "" || yanked[ref]:
				if listed {
					gone = append(gone, ref)
				}
			case !listed && !s.unlisted[ref]:
				m, err := contract.ParseManifest(bytes.Clone(d.Doc))
				if err != nil {
					s.unlisted[ref] = true
					s.log.Error("published version does not load: left out", "agent", ref, "err", err)
					return nil
				}
				fresh = append(fresh, m)
			}
			return nil
		})
		if err != nil {
			return err
		}
		return tx.ForEach(holon.BucketEvals, "", func(ref string, raw json.RawMessage) (bool, error) {
			var res struct {
				Passed bool `json:"passed"`
			}
			if err := json.Unmarshal(raw, &res); err == nil {
				verdicts[ref] = res.Passed
			}
			return true, nil
		})
	})
	if err != nil {
		return err
	}
	for _, ref := range yanks {
		if _, listed := reg.Get(ref); listed {
			gone = append(gone, ref)
		}
	}
	// Upstreams before their forks: each round lists what it can.
	for len(fresh) > 0 {
		var next []*contract.Manifest
		for _, m := range fresh {
			if _, listed := reg.Get(m.Ref()); listed {
				continue // listed by this gateway meanwhile
			}
			if err := reg.Add(&gateway.AgentVersion{Manifest: m, Facts: contract.AgentFacts{Published: true}}); err != nil {
				next = append(next, m)
			}
		}
		if len(next) == len(fresh) {
			for _, m := range next {
				s.unlisted[m.Ref()] = true
			}
			break
		}
		fresh = next
	}
	for _, ref := range gone {
		if v, ok := reg.Get(ref); ok && !v.Shipped {
			reg.Remove(ref)
		}
	}
	for ref, passed := range verdicts {
		if v, ok := reg.Get(ref); ok && v.Facts.Evaluated != passed {
			reg.SetFacts(ref, func(f *contract.AgentFacts) { f.Evaluated = passed })
		}
	}
	s.revision, s.read = rev, true
	return nil
}
