package gateway

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"

	"holon.dev/holon"
	"holon.dev/holon/gateway/contract"
	"holon.dev/holon/journal"
)

// AgentVersion is one listed agent version with what the platform knows of it.
type AgentVersion struct {
	Manifest *contract.Manifest
	Facts    contract.AgentFacts
	// Chain is the royalty chain of its lineage, nearest upstream first.
	Chain []journal.Upstream
	// ChainRefs are the exact versions of Chain, level by level: who earns
	// each royalty.
	ChainRefs []string
	// Shipped is true for agents that come with the gateway (exempt from
	// network guards and moderation).
	Shipped bool

	// search is the lowercased text a search matches (Matches).
	search string
}

// Matches reports whether a lowercased search text occurs in the version's
// id, summary, description or capabilities ("" matches every version).
func (v *AgentVersion) Matches(lowered string) bool {
	if lowered == "" {
		return true
	}
	if v.search == "" { // a version made outside Registry.Add
		return strings.Contains(searchText(v.Manifest), lowered)
	}
	return strings.Contains(v.search, lowered)
}

func searchText(m *contract.Manifest) string {
	return strings.ToLower(m.ID + " " + m.Summary + " " + m.Description + " " + strings.Join(m.Capabilities, " "))
}

// Registry is the set of agent versions the gateway can call, indexed by id
// and by capability. It holds manifests only (a few per agent), never
// receipts, so it is small enough to keep in memory.
type Registry struct {
	mu    sync.RWMutex
	byID  map[string][]*AgentVersion // versions ascending
	byRef map[string]*AgentVersion
	// latest caches Latest's answer until the registry changes (nil: to
	// be computed), so that searching many agents does not sort them on
	// every request.
	latest []*AgentVersion
	// caps are the capabilities of latest, sorted, cached with it.
	caps []string
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry {
	return &Registry{byID: map[string][]*AgentVersion{}, byRef: map[string]*AgentVersion{}}
}

// Add lists a version. Its lineage must name versions already listed; the
// same id and version cannot be added twice.
func (r *Registry) Add(v *AgentVersion) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	m := v.Manifest
	if _, ok := r.byRef[m.Ref()]; ok {
		return holon.Errorf(holon.CodeInvalidManifest, "%s is already listed: versions are immutable", m.Ref())
	}
	var refs []string
	chain, err := m.CheckLineage(func(ref string) (*contract.Manifest, bool) {
		up, ok := r.byRef[ref]
		if !ok {
			return nil, false
		}
		refs = append(refs, ref)
		return up.Manifest, true
	})
	if err != nil {
		return err
	}
	v.Chain, v.ChainRefs = chain, refs[:len(chain)]
	v.search = searchText(m)
	r.latest = nil
	r.byRef[m.Ref()] = v
	vs := append(r.byID[m.ID], v)
	sort.Slice(vs, func(i, j int) bool { return vs[i].Manifest.SemVer().Compare(vs[j].Manifest.SemVer()) < 0 })
	r.byID[m.ID] = vs
	return nil
}

// Remove stops listing a version (a yank); its number stays taken by the caller's records.
func (r *Registry) Remove(ref string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	v, ok := r.byRef[ref]
	if !ok {
		return
	}
	delete(r.byRef, ref)
	r.latest = nil
	id := v.Manifest.ID
	r.byID[id] = slices.DeleteFunc(r.byID[id], func(x *AgentVersion) bool { return x == v })
	if len(r.byID[id]) == 0 {
		delete(r.byID, id)
	}
}

// SetFacts changes what the platform knows of a listed version (its
// evaluation, say). The listed version is replaced by a copy, so a call
// already holding the old one is not raced; false when ref is not listed.
func (r *Registry) SetFacts(ref string, change func(*contract.AgentFacts)) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	old, ok := r.byRef[ref]
	if !ok {
		return false
	}
	v := *old
	change(&v.Facts)
	r.latest = nil
	r.byRef[ref] = &v
	vs := r.byID[v.Manifest.ID]
	for i := range vs {
		if vs[i] == old {
			vs[i] = &v
		}
	}
	return true
}

// Get returns the exact version ns/name@version.
func (r *Registry) Get(ref string) (*AgentVersion, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	v, ok := r.byRef[ref]
	return v, ok
}

// Resolve picks the highest listed version matching an agent reference
// (ns/name, ns/name@version or ns/name@range). Pre-releases are chosen only
// when the range names one; a bare ns/name means the highest release.
func (r *Registry) Resolve(ref string) (*AgentVersion, error) {
	ar, err := contract.ParseAgentRef(ref)
	if err != nil {
		return nil, holon.Errorf(holon.CodeInvalidRequest, "%v", err)
	}
	r.mu.RLock()
	defer r.mu.RUnlock()
	vs := r.byID[ar.ID()]
	for i := len(vs) - 1; i >= 0; i-- {
		v := vs[i].Manifest.SemVer()
		if ar.Range == nil && !v.IsPrerelease() || ar.Range != nil && ar.Range.Contains(v) {
			return vs[i], nil
		}
	}
	if len(vs) == 0 {
		return nil, holon.Errorf(holon.CodeNotFound, "no agent %s is listed", ar.ID())
	}
	return nil, holon.Errorf(holon.CodeNotFound, "no listed version of %s matches %q", ar.ID(), ref)
}

// Implementers returns, for each agent that implements capability, its
// highest listed release that does.
func (r *Registry) Implementers(capability string) []*AgentVersion {
	r.mu.RLock()
	defer r.mu.RUnlock()
	var out []*AgentVersion
	for _, vs := range r.byID {
		for i := len(vs) - 1; i >= 0; i-- {
			m := vs[i].Manifest
			if !m.SemVer().IsPrerelease() && slices.Contains(m.Capabilities, capability) {
				out = append(out, vs[i])
				break
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Manifest.ID < out[j].Manifest.ID })
	return out
}

// Versions returns every listed version of an agent, newest first.
func (r *Registry) Versions(id string) []*AgentVersion {
	r.mu.RLock()
	defer r.mu.RUnlock()
	vs := slices.Clone(r.byID[id])
	slices.Reverse(vs)
	return vs
}

// Latest returns the highest listed release of every agent (or its highest
// pre-release when it has no release), by id. The slice is shared until the
// registry next changes: callers read it and must not modify it.
func (r *Registry) Latest() []*AgentVersion {
	r.mu.RLock()
	cached := r.latest
	r.mu.RUnlock()
	if cached == nil {
		r.mu.Lock()
		r.cacheLatest()
		cached = r.latest
		r.mu.Unlock()
	}
	return cached
}

// Capabilities returns the capabilities of the versions Latest returns,
// sorted; shared like Latest's slice.
func (r *Registry) Capabilities() []string {
	r.mu.RLock()
	cached, ok := r.caps, r.latest != nil
	r.mu.RUnlock()
	if !ok {
		r.mu.Lock()
		r.cacheLatest()
		cached = r.caps
		r.mu.Unlock()
	}
	return cached
}

// cacheLatest computes Latest's answer and its capabilities when the
// registry changed; the caller holds r.mu for writing.
func (r *Registry) cacheLatest() {
	if r.latest != nil {
		return
	}
	r.latest = r.computeLatest()
	seen := map[string]bool{}
	r.caps = []string{}
	for _, v := range r.latest {
		for _, c := range v.Manifest.Capabilities {
			if !seen[c] {
				seen[c] = true
				r.caps = append(r.caps, c)
			}
		}
	}
	sort.Strings(r.caps)
}

// computeLatest is Latest's answer, computed; the caller holds r.mu.
func (r *Registry) computeLatest() []*AgentVersion {
	out := make([]*AgentVersion, 0, len(r.byID))
	for _, vs := range r.byID {
		pick := vs[len(vs)-1]
		for i := len(vs) - 1; i >= 0; i-- {
			if !vs[i].Manifest.SemVer().IsPrerelease() {
				pick = vs[i]
				break
			}
		}
		out = append(out, pick)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Manifest.ID < out[j].Manifest.ID })
	return out
}

// LoadManifestDir reads every holon.yaml (and *.yaml, *.yml, *.json
// manifest) under dir, recursively. Files that are not manifests are skipped;
// an invalid manifest is an error naming its file.
func LoadManifestDir(dir string) ([]*contract.Manifest, error) {
	var out []*contract.Manifest
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			return nil
		}
		switch strings.ToLower(filepath.Ext(path)) {
		case ".yaml", ".yml", ".json":
		default:
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if kind, _ := contract.DocumentKind(b); kind != contract.KindManifest {
			return nil
		}
		m, err := contract.ParseManifest(b)
		if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		out = append(out, m)
		return nil
	})
	return out, err
}

// AddAll lists manifests in an order that puts every upstream before its
// forks, whatever order they came in.
func (r *Registry) AddAll(ms []*contract.Manifest, facts contract.AgentFacts, shipped bool) error {
	pending := slices.Clone(ms)
	for len(pending) > 0 {
		var next []*contract.Manifest
		var lastErr error
		for _, m := range pending {
			if err := r.Add(&AgentVersion{Manifest: m, Facts: facts, Shipped: shipped}); err != nil {
				next = append(next, m)
				lastErr = err
			}
		}
		if len(next) == len(pending) {
			return fmt.Errorf("%s: %w", next[0].Ref(), lastErr)
		}
		pending = next
	}
	return nil
}
