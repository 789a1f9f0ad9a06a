package contract

import (
	"sort"
	"strings"
	"time"

	"holon.dev/holon"
	"holon.dev/holon/gateway/semver"
	"holon.dev/holon/journal"
)

// DefaultMaxDepth is delegation.max_depth when a mandate does not set it: an
// orchestrator may hire agents that hire agents, two levels below the root call.
const DefaultMaxDepth = 2

// Mandate is the authority under which calls happen (spec/mandate.md): who
// gives it, to whom, how much may be spent, which agents may be called, what
// needs a human's approval and what may happen to the data.
type Mandate struct {
	ID         string                  `json:"id" yaml:"id"`
	Issuer     string                  `json:"issuer" yaml:"issuer"`
	Grantee    string                  `json:"grantee" yaml:"grantee"`
	Currency   string                  `json:"currency" yaml:"currency"`
	Expires    *time.Time              `json:"expires,omitempty" yaml:"expires,omitempty"`
	Revoked    bool                    `json:"revoked,omitempty" yaml:"revoked,omitempty"`
	Parent     string                  `json:"parent,omitempty" yaml:"parent,omitempty"`
	Budget     Budget                  `json:"budget" yaml:"budget"`
	Approval   *Approval               `json:"approval,omitempty" yaml:"approval,omitempty"`
	Allow      Allow                   `json:"allow" yaml:"allow"`
	Deny       *Deny                   `json:"deny,omitempty" yaml:"deny,omitempty"`
	Require    *Require                `json:"require,omitempty" yaml:"require,omitempty"`
	Data       *DataRules              `json:"data,omitempty" yaml:"data,omitempty"`
	FX         map[string]journal.Rate `json:"fx,omitempty" yaml:"fx,omitempty"`
	Delegation *Delegation             `json:"delegation,omitempty" yaml:"delegation,omitempty"`

	allowAgents, denyAgents []AgentPattern
	allowCaps, denyCaps     []CapabilityPattern
}

// Budget is how much may be billed under a mandate: over its lifetime
// (Total), in each calendar window (PerWindow, when Window is set; see
// window.go), or both, and at most PerCall in the worst case of one call.
type Budget struct {
	Total   *journal.Amount `json:"total" yaml:"total"`
	PerCall *journal.Amount `json:"per_call,omitempty" yaml:"per_call,omitempty"`
	// Window is day, week or month: the budget renews by calendar window
	// in Timezone (an IANA name, UTC when empty), PerWindow in each.
	Window    string          `json:"window,omitempty" yaml:"window,omitempty"`
	PerWindow *journal.Amount `json:"per_window,omitempty" yaml:"per_window,omitempty"`
	Timezone  string          `json:"timezone,omitempty" yaml:"timezone,omitempty"`
	// Alerts are the percentages of each budget (per_window and total) at
	// which the issuer is told (alerts.go).
	Alerts []AlertThreshold `json:"alerts,omitempty" yaml:"alerts,omitempty"`

	loc *time.Location
}

// Approval says which calls need a human first.
type Approval struct {
	Above *journal.Amount `json:"above,omitempty" yaml:"above,omitempty"`
}

// Allow lists what may be called.
type Allow struct {
	Agents       []string `json:"agents,omitempty" yaml:"agents,omitempty"`
	Capabilities []string `json:"capabilities,omitempty" yaml:"capabilities,omitempty"`
	Published    bool     `json:"published,omitempty" yaml:"published,omitempty"`
}

// Deny lists what may never be called, whatever allow says.
type Deny struct {
	Agents       []string `json:"agents,omitempty" yaml:"agents,omitempty"`
	Capabilities []string `json:"capabilities,omitempty" yaml:"capabilities,omitempty"`
}

// License requirements.
const (
	RequireAny  = "any"
	RequireOpen = "open"
)

// Require holds conditions on the agent version itself.
type Require struct {
	License        string        `json:"license,omitempty" yaml:"license,omitempty"`
	Evaluated      bool          `json:"evaluated,omitempty" yaml:"evaluated,omitempty"`
	MinSuccessRate *journal.Rate `json:"min_success_rate,omitempty" yaml:"min_success_rate,omitempty"`
}

// DataRules bound what an agent may do with the data (matched against the
// manifest's data policy at admission).
type DataRules struct {
	Retention string   `json:"retention,omitempty" yaml:"retention,omitempty"`
	Regions   []string `json:"regions,omitempty" yaml:"regions,omitempty"`
	Training  *bool    `json:"training,omitempty" yaml:"training,omitempty"`
}

// Delegation bounds agents hiring agents.
type Delegation struct {
	MaxDepth *int `json:"max_depth,omitempty" yaml:"max_depth,omitempty"`
}

// ParseMandate reads a mandate (YAML or JSON) and checks it. The error is an
// *Error with code invalid_mandate listing each problem with its field path.
//
// A mandate document cannot name a parent: only the gateway derives
// sub-mandates (see DeriveSubMandate), and a parent would lift the rule that
// a mandate lives in its issuer's namespace.
func ParseMandate(b []byte) (*Mandate, error) {
	m := new(Mandate)
	validate := func() error {
		if m.Parent != "" {
			return &holon.Error{Code: holon.CodeInvalidMandate, Fields: []holon.FieldError{{Path: "parent",
				Msg: "set by the gateway on derived sub-mandates; a mandate document cannot name one"}}}
		}
		return m.Validate()
	}
	if err := decodeDocument(b, m, validate).err(holon.CodeInvalidMandate, "mandate"); err != nil {
		return nil, err
	}
	return m, nil
}

// ParseStoredMandate reads a mandate the gateway stored itself, derived
// sub-mandates included.
func ParseStoredMandate(b []byte) (*Mandate, error) {
	m := new(Mandate)
	if err := decodeDocument(b, m, m.Validate).err(holon.CodeInvalidMandate, "mandate"); err != nil {
		return nil, err
	}
	return m, nil
}

// Validate checks every field and compiles the patterns. A mandate built in
// code (a derived sub-mandate, one created through the API) must pass it
// before use.
func (m *Mandate) Validate() error {
	var fe fieldErrors
	ns, name, ok := strings.Cut(m.ID, "/")
	switch {
	case m.ID == "":
		fe.add("id", "required: <issuer>/<name>")
	case !ok || !ValidHandle(ns) || !validMandateName(name):
		fe.add("id", "%q is not <issuer>/<name> (name: lowercase letters, digits, -, _ and .)", m.ID)
	case m.Issuer != "" && ns != m.Issuer && m.Parent == "":
		fe.add("id", "%q must be in the issuer's namespace: %s/...", m.ID, m.Issuer)
	}
	if m.Issuer == "" {
		fe.add("issuer", "required: the account that gives the authority and pays")
	} else if !ValidHandle(m.Issuer) && !validAgentIdentity(m.Issuer) {
		fe.add("issuer", "%q is not an account handle", m.Issuer)
	}
	if m.Grantee == "" {
		fe.add("grantee", "required: who acts under the mandate, such as alice/assistant")
	} else if !validAgentIdentity(m.Grantee) {
		fe.add("grantee", "%q is not <handle>/<name>", m.Grantee)
	}
	if !currencyRE.MatchString(m.Currency) {
		fe.add("currency", "want an ISO 4217 code such as EUR, got %q", m.Currency)
	}
	m.validateBudget(&fe)
	m.validateAlerts(&fe)
	m.allowAgents = parseAgentPatterns(m.Allow.Agents, "allow.agents", &fe)
	m.allowCaps = parseCapabilityPatterns(m.Allow.Capabilities, "allow.capabilities", &fe)
	if m.Deny != nil {
		m.denyAgents = parseAgentPatterns(m.Deny.Agents, "deny.agents", &fe)
		m.denyCaps = parseCapabilityPatterns(m.Deny.Capabilities, "deny.capabilities", &fe)
	} else {
		m.denyAgents, m.denyCaps = nil, nil
	}
	if r := m.Require; r != nil {
		switch r.License {
		case "", RequireAny, RequireOpen:
		default:
			fe.add("require.license", "%q is not any or open", r.License)
		}
		if r.MinSuccessRate != nil && *r.MinSuccessRate > journal.One {
			fe.add("require.min_success_rate", "%s is above 1", r.MinSuccessRate)
		}
	}
	if d := m.Data; d != nil {
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
	}
	for _, cur := range sortedKeys(m.FX) {
		p := join("fx", cur)
		switch {
		case !currencyRE.MatchString(cur):
			fe.add(p, "%q is not an ISO 4217 code", cur)
		case cur == m.Currency:
			fe.add(p, "the mandate's own currency needs no rate")
		case m.FX[cur] == 0:
			fe.add(p, "a rate of 0 would make every price free")
		}
	}
	if d := m.Delegation; d != nil && d.MaxDepth != nil && *d.MaxDepth < 0 && m.Parent == "" {
		fe.add("delegation.max_depth", "%d is negative", *d.MaxDepth)
	}
	return fe.err(holon.CodeInvalidMandate, "mandate")
}

// validateBudget checks the budget's amounts and windows.
func (m *Mandate) validateBudget(fe *fieldErrors) {
	b := &m.Budget
	b.loc = nil
	switch b.Window {
	case "":
		if b.Total == nil {
			fe.add("budget.total", "required unless the budget renews by window (budget.window and budget.per_window): everything that may ever be billed under this mandate")
		}
		if b.PerWindow != nil {
			fe.add("budget.per_window", "needs budget.window: day, week or month")
		}
		if b.Timezone != "" {
			fe.add("budget.timezone", "needs budget.window: day, week or month")
		}
		return
	case WindowDay, WindowWeek, WindowMonth:
	default:
		fe.add("budget.window", "%q is not day, week or month", b.Window)
	}
	if b.PerWindow == nil {
		fe.add("budget.per_window", "required with budget.window: what may be billed in each %s", b.Window)
	}
	if b.Timezone == "" {
		b.loc = time.UTC
	} else if loc, err := loadLocation(b.Timezone); err != nil {
		fe.add("budget.timezone", "%s (UTC when absent)", err)
	} else {
		b.loc = loc
	}
}

func parseAgentPatterns(ss []string, path string, fe *fieldErrors) []AgentPattern {
	out := make([]AgentPattern, 0, len(ss))
	for i, s := range ss {
		p, err := ParseAgentPattern(s)
		if err != nil {
			fe.add(index(path, i), "%s", err)
			continue
		}
		out = append(out, p)
	}
	return out
}

func parseCapabilityPatterns(ss []string, path string, fe *fieldErrors) []CapabilityPattern {
	out := make([]CapabilityPattern, 0, len(ss))
	for i, s := range ss {
		p, err := ParseCapabilityPattern(s)
		if err != nil {
			fe.add(index(path, i), "%s", err)
			continue
		}
		out = append(out, p)
	}
	return out
}

// validMandateName allows the characters of agent names plus "." (a derived
// sub-mandate is <parent id>.<receipt id>).
func validMandateName(s string) bool {
	if s == "" || len(s) > 200 {
		return false
	}
	for _, part := range strings.Split(s, ".") {
		if !ValidAgentName(part) {
			return false
		}
	}
	return true
}

// validAgentIdentity accepts <handle>/<name>, optionally @<version> (the
// grantee of a sub-mandate is the exact agent version being run).
func validAgentIdentity(s string) bool {
	id, ver, hasVer := strings.Cut(s, "@")
	ns, name, ok := strings.Cut(id, "/")
	if !ok || !ValidHandle(ns) || !ValidAgentName(name) {
		return false
	}
	if hasVer {
		_, err := semver.ParseVersion(ver)
		return err == nil
	}
	return true
}

func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

// MaxDepth is delegation.max_depth with its default.
func (m *Mandate) MaxDepth() int {
	if m.Delegation == nil || m.Delegation.MaxDepth == nil {
		return DefaultMaxDepth
	}
	return *m.Delegation.MaxDepth
}

// Total is budget.total (journal.MaxAmount when the budget has no
// lifetime total: it renews by window only).
func (m *Mandate) Total() journal.Amount {
	if m.Budget.Total == nil {
		return journal.MaxAmount
	}
	return *m.Budget.Total
}

// PerWindow is budget.per_window (journal.MaxAmount when the budget has no
// window).
func (m *Mandate) PerWindow() journal.Amount {
	if m.Budget.PerWindow == nil {
		return journal.MaxAmount
	}
	return *m.Budget.PerWindow
}

// Rate returns the rate that converts prices in currency into the mandate's
// currency: 1 for the same currency (or none, for a free agent).
func (m *Mandate) Rate(currency string) (journal.Rate, bool) {
	if currency == "" || currency == m.Currency {
		return journal.One, true
	}
	r, ok := m.FX[currency]
	return r, ok
}

// Active reports whether the mandate may be used at now: not revoked, not expired.
func (m *Mandate) Active(now time.Time) bool {
	return !m.Revoked && (m.Expires == nil || now.Before(*m.Expires))
}
