package publishing

import (
	"bytes"
	"fmt"
	"log/slog"
	"runtime"
	"sync"

	"holon.dev/holon"
	"holon.dev/holon/gateway"
	"holon.dev/holon/gateway/contract"
)

// Load lists the published versions the store holds, upstreams
// before their forks, then withdraws the yanked ones (listed first so that
// their forks' royalty chains resolve). A version that no longer loads is
// logged and left out: it must not stop the gateway.
func Load(store holon.Store, reg *gateway.Registry, log *slog.Logger) error {
	type stored struct {
		ref    string
		doc    []byte
		yanked bool
	}
	var docs []stored
	err := store.View(func(tx holon.Tx) error {
		return tx.ForEachAgent(func(ref string, d holon.Doc) error {
			if d.Published {
				docs = append(docs, stored{ref: ref, doc: bytes.Clone(d.Doc), yanked: d.Yanked != ""})
			}
			return nil
		})
	})
	if err != nil {
		return fmt.Errorf("read published agents: %w", err)
	}
	// Compiling the schemas is most of the work (about half a millisecond a
	// version): spread it over the cores.
	parsed := make([]*contract.Manifest, len(docs))
	var wg sync.WaitGroup
	next := make(chan int)
	for w := 0; w < runtime.GOMAXPROCS(0); w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				m, err := contract.ParseManifest(docs[i].doc)
				if err != nil {
					log.Error("published version does not load: left out", "agent", docs[i].ref, "err", err)
					continue
				}
				parsed[i] = m
			}
		}()
	}
	for i := range docs {
		next <- i
	}
	close(next)
	wg.Wait()
	var ms []*contract.Manifest
	var yanked []string
	for i, m := range parsed {
		if m == nil {
			continue
		}
		ms = append(ms, m)
		if docs[i].yanked {
			yanked = append(yanked, docs[i].ref)
		}
	}
	for len(ms) > 0 {
		var next []*contract.Manifest
		var lastErr error
		for _, m := range ms {
			if err := reg.Add(&gateway.AgentVersion{Manifest: m, Facts: contract.AgentFacts{Published: true}}); err != nil {
				next, lastErr = append(next, m), err
			}
		}
		if len(next) == len(ms) {
			for _, m := range next {
				log.Error("published version cannot be listed: left out", "agent", m.Ref(), "err", lastErr)
			}
			break
		}
		ms = next
	}
	for _, ref := range yanked {
		reg.Remove(ref)
	}
	return nil
}
