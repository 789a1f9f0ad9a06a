package contract

import (
	"fmt"
	"net/url"
	"regexp"
	"strings"
	"unicode/utf8"

	"holon.dev/holon"
	"holon.dev/holon/gateway/semver"
	"holon.dev/holon/journal"
)

// Manifest is one immutable version of one agent (spec/manifest.md): what it
// offers, what it costs, how it runs and what it may delegate. A *Manifest
// returned by ParseManifest is valid and its schemas are compiled.
type Manifest struct {
	ID           string      `json:"id" yaml:"id"`
	Version      string      `json:"version" yaml:"version"`
	Summary      string      `json:"summary" yaml:"summary"`
	Description  string      `json:"description,omitempty" yaml:"description,omitempty"`
	License      string      `json:"license" yaml:"license"`
	Source       *Source     `json:"source,omitempty" yaml:"source,omitempty"`
	Capabilities []string    `json:"capabilities,omitempty" yaml:"capabilities,omitempty"`
	Interface    Interface   `json:"interface" yaml:"interface"`
	Pricing      Pricing     `json:"pricing" yaml:"pricing"`
	Runtime      Runtime     `json:"runtime" yaml:"runtime"`
	Calls        []CallDecl  `json:"calls,omitempty" yaml:"calls,omitempty"`
	Downstream   *Downstream `json:"downstream,omitempty" yaml:"downstream,omitempty"`
	Data         *DataPolicy `json:"data,omitempty" yaml:"data,omitempty"`
	Lineage      *Lineage    `json:"lineage,omitempty" yaml:"lineage,omitempty"`
	Royalties    *Royalties  `json:"royalties,omitempty" yaml:"royalties,omitempty"`

	version semver.Version
	input   *Schema
	output  *Schema
	// ref is Ref() as validation found it, so that the calls' hot path
	// does not build it again and again.
	ref   string
	calls []callSlot
}

// Source names the code a version runs.
type Source struct {
	Repository string `json:"repository" yaml:"repository"`
	Commit     string `json:"commit" yaml:"commit"`
}

// Interface is what an agent takes and returns, and how it may fail.
type Interface struct {
	Input    any                      `json:"input" yaml:"input"`
	Output   any                      `json:"output" yaml:"output"`
	Errors   map[string]DeclaredError `json:"errors,omitempty" yaml:"errors,omitempty"`
	Examples []Example                `json:"examples,omitempty" yaml:"examples,omitempty"`
}

// DeclaredError is one way an agent declares it can fail.
type DeclaredError struct {
	Billed      bool   `json:"billed" yaml:"billed"`
	Description string `json:"description,omitempty" yaml:"description,omitempty"`
}

// Example is an input with its output, or with the declared error it gives.
type Example struct {
	Input  any    `json:"input" yaml:"input"`
	Output any    `json:"output,omitempty" yaml:"output,omitempty"`
	Error  string `json:"error,omitempty" yaml:"error,omitempty"`
}

// Pricing models (manifest.md §4).
const (
	PricingFree    = "free"
	PricingPerRun  = "per_run"
	PricingPerUnit = "per_unit"
	PricingQuote   = "quote"
)

// ChargeOn values: bill only a valid output, or declared billed errors too.
const (
	ChargeOnSuccess = "success"
	ChargeOnAttempt = "attempt"
)

// Pricing is what a run costs, in the agent's currency.
type Pricing struct {
	Model    string          `json:"model" yaml:"model"`
	Amount   *journal.Amount `json:"amount,omitempty" yaml:"amount,omitempty"`
	Unit     string          `json:"unit,omitempty" yaml:"unit,omitempty"`
	Max      *journal.Amount `json:"max,omitempty" yaml:"max,omitempty"`
	Currency string          `json:"currency,omitempty" yaml:"currency,omitempty"`
	ChargeOn string          `json:"charge_on,omitempty" yaml:"charge_on,omitempty"`
}

// Runtime kinds (manifest.md §5).
const (
	RuntimeDev     = "dev"
	RuntimeMCP     = "mcp"
	RuntimeWebhook = "webhook"
)

// Timeout bounds in seconds (manifest.md §5).
const (
	DefaultTimeoutS = 60
	MaxTimeoutS     = 300
)

// Runtime says how the gateway runs the agent.
type Runtime struct {
	Kind     string  `json:"kind" yaml:"kind"`
	Endpoint string  `json:"endpoint,omitempty" yaml:"endpoint,omitempty"`
	Tool     string  `json:"tool,omitempty" yaml:"tool,omitempty"`
	Limits   *Limits `json:"limits,omitempty" yaml:"limits,omitempty"`
}

// Limits bounds a run.
type Limits struct {
	TimeoutS int `json:"timeout_s,omitempty" yaml:"timeout_s,omitempty"`
}

// CallDecl is one call an agent may delegate: a capability or an agent
// reference, and the worst case one such call may have.
type CallDecl struct {
	Capability string          `json:"capability,omitempty" yaml:"capability,omitempty"`
	Agent      string          `json:"agent,omitempty" yaml:"agent,omitempty"`
	MaxCost    *journal.Amount `json:"max_cost" yaml:"max_cost"`
}

// Downstream modes (manifest.md §6).
const (
	DownstreamPassthrough = "passthrough"
	DownstreamIncluded    = "included"
)

// Downstream says who pays delegated calls.
type Downstream struct {
	Mode string          `json:"mode" yaml:"mode"`
	Cap  *journal.Amount `json:"cap,omitempty" yaml:"cap,omitempty"`
}

// DataPolicy is what the author attests about the inputs the agent sees.
type DataPolicy struct {
	Retention     string   `json:"retention,omitempty" yaml:"retention,omitempty"`
	Regions       []string `json:"regions,omitempty" yaml:"regions,omitempty"`
	Training      *bool    `json:"training,omitempty" yaml:"training,omitempty"`
	Subprocessors []string `json:"subprocessors,omitempty" yaml:"subprocessors,omitempty"`
}

// Lineage names the listed version this agent forks.
type Lineage struct {
	ForkOf string `json:"fork_of,omitempty" yaml:"fork_of,omitempty"`
}

// Royalties is what every fork of this agent pays its author.
type Royalties struct {
	Forks *journal.Rate `json:"forks,omitempty" yaml:"forks,omitempty"`
}

// MaxRoyalty is the largest royalties.forks rate (manifest.md §8).
var MaxRoyalty = journal.MustParseRate("0.5")

// callSlot is a parsed `calls` entry.
type callSlot struct {
	capability CapabilityPattern
	agent      *AgentRef
	maxCost    journal.Amount
}

var (
	currencyRE   = regexp.MustCompile(`^[A-Z]{3}$`)
	errorCodeRE  = regexp.MustCompile(`^[a-z][a-z0-9_]{0,63}$`)
	regionRE     = regexp.MustCompile(`^[a-z]{2,}(-[a-z0-9]+)*$`)
	retentionRE  = regexp.MustCompile(`^([1-9][0-9]{0,5})(s|m|h|d|w)$`)
	githubRepoRE = regexp.MustCompile(`^https://github\.com/[A-Za-z0-9](?:[A-Za-z0-9-]{0,38})/[A-Za-z0-9._-]{1,100}$`)
	commitRE     = regexp.MustCompile(`^[0-9a-f]{7,64}$`)
)

// ParseManifest reads a manifest (YAML, or the same document as JSON),
// checks every rule of manifest.md §9 that needs no registry, and compiles
// its schemas. The error is an *Error with code invalid_manifest listing each
// problem with its field path. Lineage is checked separately by
// CheckLineage, which needs the registry.
func ParseManifest(b []byte) (*Manifest, error) {
	m := new(Manifest)
	if err := decodeDocument(b, m, m.validate).err(holon.CodeInvalidManifest, "manifest"); err != nil {
		return nil, err
	}
	return m, nil
}

// Ref is the exact reference of this version: ns/name@version.
func (m *Manifest) Ref() string {
	// The one validation built, unless ID or Version changed since.
	if r, n := m.ref, len(m.ID); len(r) == n+1+len(m.Version) && r[:n] == m.ID && r[n] == '@' && r[n+1:] == m.Version {
		return r
	}
	return m.ID + "@" + m.Version
}

// NS is the namespace (the author's handle) of the agent.
func (m *Manifest) NS() string { ns, _, _ := strings.Cut(m.ID, "/"); return ns }

// Name is the agent's name within its namespace.
func (m *Manifest) Name() string { _, n, _ := strings.Cut(m.ID, "/"); return n }

// SemVer is the parsed version.
func (m *Manifest) SemVer() semver.Version { return m.version }

// InputSchema is the compiled interface.input.
func (m *Manifest) InputSchema() *Schema { return m.input }

// OutputSchema is the compiled interface.output.
func (m *Manifest) OutputSchema() *Schema { return m.output }

// Timeout is the hard timeout of a run, in seconds.
func (m *Manifest) Timeout() int {
	if m.Runtime.Limits == nil || m.Runtime.Limits.TimeoutS == 0 {
		return DefaultTimeoutS
	}
	return m.Runtime.Limits.TimeoutS
}

// ChargeOn is pricing.charge_on with its default.
func (m *Manifest) ChargeOn() string {
	if m.Pricing.ChargeOn == "" {
		return ChargeOnSuccess
	}
	return m.Pricing.ChargeOn
}

// Currency is the agent's pricing currency; "" for a free agent that names none.
func (m *Manifest) Currency() string { return m.Pricing.Currency }

// OpenSource reports an OSI license with source, which require.license: open asks for.
func (m *Manifest) OpenSource() bool {
	return m.License != LicenseProprietary && m.Source != nil && m.Source.Repository != ""
}

// ForkRate is royalties.forks with its default of 0.
func (m *Manifest) ForkRate() journal.Rate {
	if m.Royalties == nil || m.Royalties.Forks == nil {
		return 0
	}
	return *m.Royalties.Forks
}

// ForkOf is lineage.fork_of, or "".
func (m *Manifest) ForkOf() string {
	if m.Lineage == nil {
		return ""
	}
	return m.Lineage.ForkOf
}

// Passthrough reports whether the caller's payer pays delegated calls.
func (m *Manifest) Passthrough() bool {
	return m.Downstream != nil && m.Downstream.Mode == DownstreamPassthrough
}

// ListedWorstCase is the most one run can cost for its own work, in the
// agent's currency: 0, amount, or max (manifest.md §4).
func (m *Manifest) ListedWorstCase() journal.Amount {
	switch m.Pricing.Model {
	case PricingPerRun:
		return *m.Pricing.Amount
	case PricingPerUnit, PricingQuote:
		return *m.Pricing.Max
	}
	return 0
}

// WorstCase is the listed worst case plus downstream.cap under passthrough:
// the most one call can take from its payer, in the agent's currency.
func (m *Manifest) WorstCase() journal.Amount {
	w := m.ListedWorstCase()
	if m.Passthrough() {
		// Both are bounded by ParseAmount, and validate refused a sum that overflows.
		w, _ = w.Add(*m.Downstream.Cap)
	}
	return w
}

// IsDeclared reports whether code is one of interface.errors, and whether it
// is marked billed.
func (m *Manifest) IsDeclared(code string) (declared, billed bool) {
	d, ok := m.Interface.Errors[code]
	return ok, ok && d.Billed
}

func (m *Manifest) validate() error {
	var fe fieldErrors
	m.validateIdentity(&fe)
	m.validateInterface(&fe)
	m.validatePricing(&fe)
	m.validateRuntime(&fe)
	m.validateDelegation(&fe)
	m.validateData(&fe)
	m.validateLicense(&fe)
	if len(fe) == 0 {
		m.validateExamples(&fe)
	}
	return fe.err(holon.CodeInvalidManifest, "manifest")
}

func (m *Manifest) validateIdentity(fe *fieldErrors) {
	switch ns, name, ok := strings.Cut(m.ID, "/"); {
	case m.ID == "":
		fe.add("id", "required: <namespace>/<name>")
	case !ok || !ValidHandle(ns) || !ValidAgentName(name):
		fe.add("id", "%q is not <namespace>/<name> (namespace: 2-39 lowercase letters, digits and single hyphens; name: 1-64 lowercase letters, digits, - and _)", m.ID)
	}
	if m.Version == "" {
		fe.add("version", "required: a semantic version such as 1.0.0")
	} else if v, err := semver.ParseVersion(m.Version); err != nil {
		fe.add("version", "%s", err)
	} else {
		m.version = v
	}
	m.ref = m.ID + "@" + m.Version
	switch {
	case strings.TrimSpace(m.Summary) == "":
		fe.add("summary", "required: one line that says what the agent does")
	case utf8.RuneCountInString(m.Summary) > 280:
		fe.add("summary", "at most 280 characters, got %d", utf8.RuneCountInString(m.Summary))
	case strings.ContainsAny(m.Summary, "\n\r"):
		fe.add("summary", "one line: put longer text in description")
	}
	for i, c := range m.Capabilities {
		if !ValidCapability(c) {
			fe.add(index("capabilities", i), "%q is not a capability (dot-separated lowercase segments such as extraction.table)", c)
		}
	}
}

func (m *Manifest) validateInterface(fe *fieldErrors) {
	var err error
	if m.Interface.Input == nil {
		fe.add("interface.input", "required: a JSON Schema ({} accepts anything)")
	} else if m.input, err = CompileSchema(m.Interface.Input); err != nil {
		fe.add("interface.input", "%s", err)
	}
	if m.Interface.Output == nil {
		fe.add("interface.output", "required: a JSON Schema ({} accepts anything)")
	} else if m.output, err = CompileSchema(m.Interface.Output); err != nil {
		fe.add("interface.output", "%s", err)
	}
	for _, code := range sortedKeys(m.Interface.Errors) {
		p := join("interface.errors", code)
		switch {
		case !errorCodeRE.MatchString(code):
			fe.add(p, "error codes match ^[a-z][a-z0-9_]{0,63}$")
		case reservedErrorCodes[code]:
			fe.add(p, "%s is a code the gateway itself uses and cannot be declared", code)
		case code == "over_budget" && m.Interface.Errors[code].Billed:
			fe.add(join(p, "billed"), "over_budget refuses a max_cost up front and is never billed")
		}
	}
}

func (m *Manifest) validatePricing(fe *fieldErrors) {
	p := &m.Pricing
	need := func(field string, present bool, why string) {
		if !present {
			fe.add(join("pricing", field), "required for %s pricing%s", p.Model, why)
		}
	}
	refuse := func(field string, present bool) {
		if present {
			fe.add(join("pricing", field), "not used by %s pricing", p.Model)
		}
	}
	switch p.Model {
	case PricingFree:
		refuse("amount", p.Amount != nil)
		refuse("unit", p.Unit != "")
		refuse("max", p.Max != nil)
	case PricingPerRun:
		need("amount", p.Amount != nil, "")
		refuse("unit", p.Unit != "")
		refuse("max", p.Max != nil)
	case PricingPerUnit:
		need("amount", p.Amount != nil, " (the price of one unit)")
		need("unit", p.Unit != "", " (a label such as \"1k tokens\")")
		need("max", p.Max != nil, " (the most one run can cost)")
	case PricingQuote:
		need("max", p.Max != nil, " (the most one run can cost)")
		refuse("amount", p.Amount != nil)
		refuse("unit", p.Unit != "")
	case "":
		fe.add("pricing.model", "required: free, per_run, per_unit or quote")
		return
	default:
		fe.add("pricing.model", "%q is not free, per_run, per_unit or quote", p.Model)
		return
	}
	switch {
	case p.Currency == "" && p.Model != PricingFree:
		fe.add("pricing.currency", "required: an ISO 4217 code such as EUR")
	case p.Currency != "" && !currencyRE.MatchString(p.Currency):
		fe.add("pricing.currency", "%q is not an ISO 4217 code (three capital letters such as EUR)", p.Currency)
	}
	switch p.ChargeOn {
	case "", ChargeOnSuccess, ChargeOnAttempt:
	default:
		fe.add("pricing.charge_on", "%q is not success or attempt", p.ChargeOn)
	}
}

func (m *Manifest) validateRuntime(fe *fieldErrors) {
	r := &m.Runtime
	switch r.Kind {
	case RuntimeDev:
		if r.Endpoint != "" {
			fe.add("runtime.endpoint", "not used by the dev runtime")
		}
	case RuntimeMCP, RuntimeWebhook:
		validateEndpoint(r.Endpoint, fe)
		if r.Kind == RuntimeMCP && r.Tool == "" {
			fe.add("runtime.tool", "required for mcp: the tool to call")
		}
		if r.Kind == RuntimeWebhook {
			if r.Tool != "" {
				fe.add("runtime.tool", "not used by webhook agents")
			}
			if m.Pricing.Model != PricingFree && m.Pricing.Model != PricingPerRun {
				fe.add("pricing.model", "a webhook agent can only be free or per_run: its answer has no channel for units or a quote")
			}
		}
	case "":
		fe.add("runtime.kind", "required: dev, mcp or webhook")
	default:
		fe.add("runtime.kind", "%q is not dev, mcp or webhook", r.Kind)
	}
	if r.Limits != nil && r.Limits.TimeoutS != 0 && (r.Limits.TimeoutS < 1 || r.Limits.TimeoutS > MaxTimeoutS) {
		fe.add("runtime.limits.timeout_s", "%d is not between 1 and %d", r.Limits.TimeoutS, MaxTimeoutS)
	}
}

func validateEndpoint(endpoint string, fe *fieldErrors) {
	if endpoint == "" {
		fe.add("runtime.endpoint", "required: the URL of the agent")
		return
	}
	u, err := url.Parse(endpoint)
	switch {
	case err != nil:
		fe.add("runtime.endpoint", "not a URL: %s", err)
	case u.Scheme != "https" && u.Scheme != "http":
		fe.add("runtime.endpoint", "want an https URL, got scheme %q", u.Scheme)
	case u.Host == "":
		fe.add("runtime.endpoint", "want an absolute URL with a host")
	case u.User != nil:
		fe.add("runtime.endpoint", "must not carry credentials: set them with PUT /v0/agents/{ns}/{name}/credential")
	case u.Fragment != "":
		fe.add("runtime.endpoint", "must not have a fragment")
	}
}

func (m *Manifest) validateDelegation(fe *fieldErrors) {
	switch {
	case len(m.Calls) > 0 && m.Downstream == nil:
		fe.add("downstream", "required with calls: passthrough (the caller pays, up to cap) or included (you pay)")
	case len(m.Calls) == 0 && m.Downstream != nil:
		fe.add("calls", "required with downstream: declare every call the agent may make")
	}
	m.calls = m.calls[:0]
	for i, c := range m.Calls {
		p := index("calls", i)
		var slot callSlot
		switch {
		case c.Capability != "" && c.Agent != "":
			fe.add(p, "name a capability or an agent, not both")
		case c.Capability != "":
			cp, err := ParseCapabilityPattern(c.Capability)
			if err != nil {
				fe.add(join(p, "capability"), "%s", err)
			}
			slot.capability = cp
		case c.Agent != "":
			ref, err := ParseAgentRef(c.Agent)
			if err != nil {
				fe.add(join(p, "agent"), "%s", err)
			}
			slot.agent = &ref
		default:
			fe.add(p, "name a capability or an agent")
		}
		if c.MaxCost == nil {
			fe.add(join(p, "max_cost"), "required: the worst case of one call through this entry")
		} else {
			slot.maxCost = *c.MaxCost
		}
		m.calls = append(m.calls, slot)
	}
	if d := m.Downstream; d != nil {
		switch d.Mode {
		case DownstreamPassthrough:
			if d.Cap == nil {
				fe.add("downstream.cap", "required for passthrough: the most the agent may spend downstream in one run")
			} else if _, err := m.ListedWorstCaseOrZero().Add(*d.Cap); err != nil {
				fe.add("downstream.cap", "worst case (price plus cap) is too large")
			}
		case DownstreamIncluded:
			if d.Cap != nil {
				fe.add("downstream.cap", "not used with included: the agent's own price is its downstream budget")
			}
		case "":
			fe.add("downstream.mode", "required: passthrough or included")
		default:
			fe.add("downstream.mode", "%q is not passthrough or included", d.Mode)
		}
	}
}

// ListedWorstCaseOrZero is ListedWorstCase for a manifest whose pricing may
// still be incomplete (during validation).
func (m *Manifest) ListedWorstCaseOrZero() journal.Amount {
	switch m.Pricing.Model {
	case PricingPerRun:
		if m.Pricing.Amount != nil {
			return *m.Pricing.Amount
		}
	case PricingPerUnit, PricingQuote:
		if m.Pricing.Max != nil {
			return *m.Pricing.Max
		}
	}
	return 0
}

func (m *Manifest) validateData(fe *fieldErrors) {
	d := m.Data
	if d == nil {
		return
	}
	if d.Retention != "" {
		if _, err := ParseRetention(d.Retention); err != nil {
			fe.add("data.retention", "%s", err)
		}
	}
	for i, r := range d.Regions {
		if !regionRE.MatchString(r) {
			fe.add(index("data.regions", i), "%q is not a lowercase region code such as eu or us", r)
		}
	}
	for i, s := range d.Subprocessors {
		if strings.TrimSpace(s) == "" {
			fe.add(index("data.subprocessors", i), "empty name")
		}
	}
}

func (m *Manifest) validateLicense(fe *fieldErrors) {
	switch {
	case m.License == "":
		fe.add("license", "required: an OSI-approved SPDX identifier such as MIT or Apache-2.0, or proprietary")
	case m.License == LicenseProprietary:
	case !osiLicenses[m.License]:
		fe.add("license", "%q is not an OSI-approved SPDX identifier (such as MIT, Apache-2.0, AGPL-3.0-only) nor proprietary", m.License)
	case m.Source == nil:
		fe.add("source", "required for an open-source license: repository (https://github.com/<owner>/<repo>) and commit")
	}
	if s := m.Source; s != nil {
		if !githubRepoRE.MatchString(s.Repository) {
			fe.add("source.repository", "%q is not https://github.com/<owner>/<repo>", s.Repository)
		}
		if !commitRE.MatchString(s.Commit) {
			fe.add("source.commit", "%q is not a commit hash (7 to 64 lowercase hex digits)", s.Commit)
		}
	}
	if m.Royalties != nil && m.Royalties.Forks != nil && *m.Royalties.Forks > MaxRoyalty {
		fe.add("royalties.forks", "%s is above the most a fork can pay upstream, %s", m.Royalties.Forks, MaxRoyalty)
	}
	if f := m.ForkOf(); f != "" {
		ref, err := ParseAgentRef(f)
		switch {
		case err != nil:
			fe.add("lineage.fork_of", "%s", err)
		case ref.Range == nil || !isExactVersion(ref.Range.String()):
			fe.add("lineage.fork_of", "%q must name an exact version: ns/name@1.2.3", f)
		case ref.NS+"/"+ref.Name == m.ID:
			fe.add("lineage.fork_of", "an agent cannot fork itself")
		}
	}
}

func (m *Manifest) validateExamples(fe *fieldErrors) {
	for i, ex := range m.Interface.Examples {
		p := index("interface.examples", i)
		if ex.Input == nil {
			fe.add(join(p, "input"), "required")
		} else if err := m.input.Validate(ex.Input); err != nil {
			fe.add(join(p, "input"), "does not match interface.input: %s", err)
		}
		switch {
		case ex.Output != nil && ex.Error != "":
			fe.add(p, "give output or error, not both")
		case ex.Output != nil:
			if err := m.output.Validate(ex.Output); err != nil {
				fe.add(join(p, "output"), "does not match interface.output: %s", err)
			}
		case ex.Error != "":
			if _, ok := m.Interface.Errors[ex.Error]; !ok {
				fe.add(join(p, "error"), "%q is not declared in interface.errors", ex.Error)
			}
		default:
			fe.add(p, "give output or error")
		}
	}
}

// ManifestLookup finds a listed version by exact reference (ns/name@version).
type ManifestLookup func(ref string) (*Manifest, bool)

// CheckLineage checks lineage.fork_of against the registry: the named
// version exists and is listed, and the chain of forks is at most
// journal.MaxChain long and does not loop. It returns the royalty chain, from
// the nearest upstream to the farthest, for journal.Split.
func (m *Manifest) CheckLineage(lookup ManifestLookup) ([]journal.Upstream, error) {
	var chain []journal.Upstream
	seen := map[string]bool{m.ID: true}
	cur := m
	for cur.ForkOf() != "" {
		ref := exactRef(cur.ForkOf())
		up, ok := lookup(ref)
		if !ok {
			return nil, &holon.Error{Code: holon.CodeInvalidManifest, Msg: "manifest is invalid", Fields: []holon.FieldError{{
				Path: "lineage.fork_of", Msg: fmt.Sprintf("%s is not a listed version", ref)}}}
		}
		if seen[up.ID] {
			return nil, &holon.Error{Code: holon.CodeInvalidManifest, Msg: "manifest is invalid", Fields: []holon.FieldError{{
				Path: "lineage.fork_of", Msg: fmt.Sprintf("the chain of forks loops at %s", up.Ref())}}}
		}
		seen[up.ID] = true
		chain = append(chain, journal.Upstream{Account: up.NS(), Rate: up.ForkRate()})
		if len(chain) > journal.MaxChain {
			return nil, &holon.Error{Code: holon.CodeInvalidManifest, Msg: "manifest is invalid", Fields: []holon.FieldError{{
				Path: "lineage.fork_of", Msg: fmt.Sprintf("the chain of forks is longer than %d", journal.MaxChain)}}}
		}
		cur = up
	}
	return chain, nil
}

// exactRef writes a fork_of reference as the registry keys it,
// ns/name@version: validation accepts the exact version written "=1.2.3".
func exactRef(forkOf string) string {
	id, v, _ := strings.Cut(forkOf, "@")
	return id + "@" + strings.TrimPrefix(strings.TrimSpace(v), "=")
}

// isExactVersion reports whether a range names one exact version.
func isExactVersion(r string) bool {
	_, err := semver.ParseVersion(strings.TrimPrefix(r, "="))
	return err == nil
}
