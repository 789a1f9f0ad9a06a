// Package agents holds the agents compiled into the binary (runtime.kind:
// dev): each one's holon.yaml, embedded, and its handler in Go, one file per
// agent. Two sets exist: "agents", the shipped agents that do real work
// (holon-labs/csv-profile), and "examples", the demo agents that replay the
// delegated invoice run of spec/gateway.md §4 (holon-labs/invoice-pipeline,
// holon-labs/text-tables, holon-labs/company-lookup).
//
// The manifests live in <set>/<agent name>/holon.yaml beside this file.
package agents

import (
	"cmp"
	"embed"
	"fmt"
	"io/fs"
	"path"
	"slices"

	"holon.dev/holon/gateway"
)

// The sets of agents, by the folder that holds their manifests.
const (
	// SetAgents is the shipped agents.
	SetAgents = "agents"
	// SetExamples is the demo agents.
	SetExamples = "examples"
)

//go:embed agents/*/holon.yaml examples/*/holon.yaml examples/company-lookup/companies.json
var files embed.FS

// Sets lists the sets Load accepts.
func Sets() []string { return []string{SetAgents, SetExamples} }

// Load parses the manifests of one set, ordered by agent id. Each call
// parses afresh, so callers never share a *gateway.Manifest.
func Load(set string) ([]*gateway.Manifest, error) {
	if !slices.Contains(Sets(), set) {
		return nil, fmt.Errorf("load agents: unknown set %q (want one of %q)", set, Sets())
	}
	names, err := fs.Glob(files, path.Join(set, "*", "holon.yaml"))
	if err != nil {
		return nil, fmt.Errorf("load agents %s: %w", set, err)
	}
	ms := make([]*gateway.Manifest, 0, len(names))
	for _, name := range names {
		b, err := files.ReadFile(name)
		if err != nil {
			return nil, fmt.Errorf("load agents %s: %w", set, err)
		}
		m, err := gateway.ParseManifest(b)
		if err != nil {
			return nil, fmt.Errorf("load agents %s: %s: %w", set, name, err)
		}
		ms = append(ms, m)
	}
	slices.SortFunc(ms, func(a, b *gateway.Manifest) int { return cmp.Compare(a.ID, b.ID) })
	return ms, nil
}

// Register makes every agent's handler, of both sets, available to rt under
// the name its manifest runs (runtime.tool, which these manifests leave to
// default to the agent's name).
func Register(rt *gateway.DevRuntime) {
	rt.Register("csv-profile", csvProfile)
	rt.Register("text-tables", textTables)
	rt.Register("company-lookup", companyLookup)
	rt.Register("invoice-pipeline", invoicePipeline)
}
