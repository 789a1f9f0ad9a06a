// Package agents holds the agents compiled into the binary (runtime.kind:
// dev): each one's holon.yaml, embedded, and its handler in Go, one file per
// agent. Two sets exist: "agents", the shipped agents that do real work
// (holon-labs/csv-profile, and holon-labs/summarize, excluded by default),
// and "examples", the demo agents that replay the
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
	"strings"

	"holon.dev/holon/gateway"
	"holon.dev/holon/gateway/contract"
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
// parses afresh, so callers never share a *contract.Manifest.
func Load(set string) ([]*contract.Manifest, error) {
	if !slices.Contains(Sets(), set) {
		return nil, fmt.Errorf("load agents: unknown set %q (want one of %q)", set, Sets())
	}
	names, err := fs.Glob(files, path.Join(set, "*", "holon.yaml"))
	if err != nil {
		return nil, fmt.Errorf("load agents %s: %w", set, err)
	}
	ms := make([]*contract.Manifest, 0, len(names))
	for _, name := range names {
		b, err := files.ReadFile(name)
		if err != nil {
			return nil, fmt.Errorf("load agents %s: %w", set, err)
		}
		m, err := contract.ParseManifest(b)
		if err != nil {
			return nil, fmt.Errorf("load agents %s: %s: %w", set, name, err)
		}
		ms = append(ms, m)
	}
	slices.SortFunc(ms, func(a, b *contract.Manifest) int { return cmp.Compare(a.ID, b.ID) })
	return ms, nil
}

// Options are the operator's settings of the agents that need them.
type Options struct {
	// Summarize configures holon-labs/summarize.
	Summarize SummarizeConfig
}

// OptionsFromEnv reads the agents' settings from the environment:
// ANTHROPIC_API_KEY, ANTHROPIC_BASE_URL and HOLON_SUMMARIZE_MODEL.
func OptionsFromEnv(getenv func(string) string) Options {
	return Options{Summarize: SummarizeConfigFromEnv(getenv)}
}

// Register makes every agent's handler, of both sets, available to rt under
// the name its manifest runs (runtime.tool, which these manifests leave to
// default to the agent's name), with no operator settings: summarize then
// fails every run with agent_error (it has no API key).
func Register(rt *gateway.DevRuntime) { RegisterWith(rt, Options{}) }

// RegisterWith is Register with the operator's settings.
func RegisterWith(rt *gateway.DevRuntime, opts Options) {
	rt.Register("csv-profile", csvProfile)
	rt.Register("summarize", newSummarizer(opts.Summarize).run)
	rt.Register("text-tables", textTables)
	rt.Register("company-lookup", companyLookup)
	rt.Register("invoice-pipeline", invoicePipeline)
}

// DefaultExclude are the agents not listed unless HOLON_EXCLUDE says
// otherwise: holon-labs/summarize spends the operator's Anthropic credits,
// holon-labs/sec-company is paused until it has an SEC contact.
var DefaultExclude = []string{"holon-labs/summarize", "holon-labs/sec-company"}

// ParseExclude reads HOLON_EXCLUDE: a comma list of agent ids (ns/name)
// that are not listed, whatever HOLON_REGISTRY holds. Empty (or unset)
// means DefaultExclude; "none" excludes nothing (an empty, non-nil list).
func ParseExclude(s string) ([]string, error) {
	s = strings.TrimSpace(s)
	switch s {
	case "":
		return slices.Clone(DefaultExclude), nil
	case "none":
		return []string{}, nil
	}
	out := []string{}
	for _, id := range strings.Split(s, ",") {
		id = strings.TrimSpace(id)
		if id == "" {
			continue
		}
		ns, name, ok := strings.Cut(id, "/")
		if !ok || !contract.ValidHandle(ns) || !contract.ValidAgentName(name) {
			return nil, fmt.Errorf("HOLON_EXCLUDE: %q is not an agent id (ns/name)", id)
		}
		out = append(out, id)
	}
	return out, nil
}

// Without returns the manifests whose agent is not excluded.
func Without(ms []*contract.Manifest, exclude []string) []*contract.Manifest {
	return slices.DeleteFunc(slices.Clone(ms), func(m *contract.Manifest) bool {
		return slices.Contains(exclude, m.ID)
	})
}
