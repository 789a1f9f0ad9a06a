package contract

import (
	"fmt"
	"maps"
	"slices"

	"holon.dev/holon"
	"holon.dev/holon/journal"
)

// CheckAttenuation returns every field in which child is wider than parent
// (mandate.md §4), or nil when the child is within it. parentLeft is what the
// parent can still give the child: its total less what it spent and
// reserved, and no more than its current window has left (BudgetState.Left),
// plus what it reserved for the call the child serves.
//
// Windows attenuate too: a child never allows more in a window than its
// parent has left in it. A child with a lifetime total within parentLeft
// can never spend more than that, whatever its windows. A child without
// one renews with its parent: the same windows (budget.window and
// budget.timezone), a per_window no larger than the parent's, and within
// what the parent's current window has left.
func CheckAttenuation(child, parent *Mandate, parentLeft journal.Amount) []string {
	var wide []string
	widen := func(field string, cond bool) {
		if cond {
			wide = append(wide, field)
		}
	}
	widen("issuer", child.Issuer != parent.Grantee)
	widen("currency", child.Currency != parent.Currency)
	widen("fx", !maps.Equal(child.FX, parent.FX))
	sameWindows := child.Windowed() && parent.Windowed() &&
		child.Budget.Window == parent.Budget.Window && child.Location().String() == parent.Location().String()
	if child.Budget.Total != nil {
		widen("budget.total", *child.Budget.Total > parentLeft)
	} else {
		widen("budget.total", parent.Budget.Total != nil || !sameWindows)
	}
	widen("budget.per_window", sameWindows &&
		(child.PerWindow() > parent.PerWindow() || (child.Budget.Total == nil && child.PerWindow() > parentLeft)))
	widen("budget.per_call", parent.Budget.PerCall != nil &&
		(child.Budget.PerCall == nil || *child.Budget.PerCall > *parent.Budget.PerCall))

	widen("allow.agents", !agentPatternsCovered(child.allowAgents, parent.allowAgents))
	widen("allow.capabilities", !capabilityPatternsCovered(child.allowCaps, parent.allowCaps))
	widen("allow.published", child.Allow.Published && !parent.Allow.Published)
	// The child denies at least what the parent denies.
	widen("deny.agents", !agentPatternsCovered(parent.denyAgents, child.denyAgents))
	widen("deny.capabilities", !capabilityPatternsCovered(parent.denyCaps, child.denyCaps))

	cr, pr := child.Require, parent.Require
	if cr == nil {
		cr = &Require{}
	}
	if pr == nil {
		pr = &Require{}
	}
	widen("require.license", pr.License == RequireOpen && cr.License != RequireOpen)
	widen("require.evaluated", pr.Evaluated && !cr.Evaluated)
	widen("require.min_success_rate", pr.MinSuccessRate != nil &&
		(cr.MinSuccessRate == nil || *cr.MinSuccessRate < *pr.MinSuccessRate))

	cd, pd := child.Data, parent.Data
	if cd == nil {
		cd = &DataRules{}
	}
	if pd == nil {
		pd = &DataRules{}
	}
	if pd.Retention != "" {
		pl, _ := ParseRetention(pd.Retention)
		cl, err := ParseRetention(cd.Retention)
		widen("data.retention", cd.Retention == "" || err != nil || cl > pl)
	}
	widen("data.regions", len(pd.Regions) > 0 &&
		(len(cd.Regions) == 0 || slices.ContainsFunc(cd.Regions, func(r string) bool { return !slices.Contains(pd.Regions, r) })))
	widen("data.training", pd.Training != nil && !*pd.Training && (cd.Training == nil || *cd.Training))

	pa, ca := approvalAbove(parent), approvalAbove(child)
	widen("approval.above", pa != nil && (ca == nil || *ca > *pa))

	widen("delegation.max_depth", child.MaxDepth() >= parent.MaxDepth())
	widen("expires", parent.Expires != nil && (child.Expires == nil || child.Expires.After(*parent.Expires)))
	return wide
}

func approvalAbove(m *Mandate) *journal.Amount {
	if m.Approval == nil {
		return nil
	}
	return m.Approval.Above
}

// agentPatternsCovered reports whether every pattern in child is covered by
// some pattern in parent.
func agentPatternsCovered(child, parent []AgentPattern) bool {
	for _, c := range child {
		if !slices.ContainsFunc(parent, func(p AgentPattern) bool { return p.Covers(c) }) {
			return false
		}
	}
	return true
}

func capabilityPatternsCovered(child, parent []CapabilityPattern) bool {
	for _, c := range child {
		if !slices.ContainsFunc(parent, func(p CapabilityPattern) bool { return p.Covers(c) }) {
			return false
		}
	}
	return true
}

// DeriveSubMandate builds the sub-mandate under which an orchestrator's
// delegated calls run (gateway.md §3): issued by the caller's grantee to the
// agent version being run, allowing exactly the agent's declared calls, with
// a budget of downstream.cap (passthrough) or the agent's own worst case
// (included), converted into the mandate's currency; when the caller set
// maxCost, at most what it leaves after the agent's own worst case
// (passthrough) or at most maxCost (included), so never above W. Deny,
// require, data, approval and fx are inherited; max_depth is one less. The
// result is checked with CheckAttenuation against parentLeft and refused,
// with gateway_error, if it would widen the parent.
func DeriveSubMandate(parent *Mandate, a *Manifest, receiptID string, maxCost *journal.Amount, parentLeft journal.Amount) (*Mandate, error) {
	if len(a.Calls) == 0 || a.Downstream == nil {
		return nil, holon.Errorf(holon.CodeNotDeclared, "%s declares no calls: it cannot delegate", a.Ref())
	}
	rate, ok := parent.Rate(a.Currency())
	if !ok {
		return nil, holon.Errorf(holon.CodeGatewayError, "derive sub-mandate: no fx rate for %s", a.Currency())
	}
	own, err := journal.ConvertUp(a.ListedWorstCase(), rate)
	if err != nil {
		return nil, holon.Errorf(holon.CodeGatewayError, "derive sub-mandate: %v", err)
	}
	budget := own
	if a.Passthrough() {
		// What the converted worst case leaves after the converted own
		// price: own + budget is exactly the W reserved for the call, where
		// converting the cap alone could round one micro-unit above it.
		worst, err := journal.ConvertUp(a.WorstCase(), rate)
		if err != nil {
			return nil, holon.Errorf(holon.CodeGatewayError, "derive sub-mandate: %v", err)
		}
		budget = worst - own
	}
	if maxCost != nil {
		if a.Passthrough() {
			// Delegated calls get what the cap leaves after the agent's own price.
			budget = journal.Min(budget, max(*maxCost-own, 0))
		} else {
			// The agent pays them out of its own price, which max_cost caps;
			// a budget above W could exceed what the parent has left.
			budget = journal.Min(budget, *maxCost)
		}
	}
	depth := parent.MaxDepth() - 1
	child := &Mandate{
		ID:       fmt.Sprintf("%s.%s", parent.ID, receiptID),
		Issuer:   parent.Grantee,
		Grantee:  a.Ref(),
		Currency: parent.Currency,
		Expires:  parent.Expires,
		Parent:   parent.ID,
		Budget:   Budget{Total: &budget, PerCall: parent.Budget.PerCall},
		Approval: parent.Approval,
		Allow:    Allow{Published: parent.Allow.Published},
		Deny:     parent.Deny,
		Require:  parent.Require,
		Data:     parent.Data,
		FX:       maps.Clone(parent.FX),
		Delegation: &Delegation{
			MaxDepth: &depth,
		},
	}
	for _, c := range a.Calls {
		if c.Capability != "" {
			child.Allow.Capabilities = append(child.Allow.Capabilities, c.Capability)
		} else {
			child.Allow.Agents = append(child.Allow.Agents, c.Agent)
		}
	}
	if err := child.Validate(); err != nil {
		return nil, &holon.Error{Code: holon.CodeGatewayError, Msg: "derived sub-mandate is invalid", Err: err}
	}
	if wide := CheckAttenuation(child, parent, parentLeft); len(wide) > 0 {
		return nil, holon.Errorf(holon.CodeGatewayError, "the sub-mandate for %s would widen its parent %s in %v", a.Ref(), parent.ID, wide)
	}
	return child, nil
}

// Slot finds the declared call that a downstream call to agent b (asked for
// by capability, or by name when capability is "") fits, given the call's
// worst case in the orchestrator's currency. It returns not_declared when no
// entry names it, and over_per_call's cousin, not_declared with a message,
// when entries name it but none has room for its worst case.
func (m *Manifest) Slot(b *Manifest, capability string, worst journal.Amount) (journal.Amount, error) {
	named := false
	for _, s := range m.calls {
		switch {
		case capability != "" && s.agent == nil && s.capability.Match(capability) && slices.Contains(b.Capabilities, capability):
		case capability == "" && s.agent != nil && s.agent.ID() == b.ID && (s.agent.Range == nil || s.agent.Range.Contains(b.version)):
		default:
			continue
		}
		named = true
		if worst <= s.maxCost {
			return s.maxCost, nil
		}
	}
	if named {
		return 0, holon.Errorf(holon.CodeNotDeclared, "%s's worst case %s is above the max_cost of every calls entry of %s that names it", b.Ref(), worst, m.Ref())
	}
	what := b.ID
	if capability != "" {
		what = "capability " + capability
	}
	return 0, holon.Errorf(holon.CodeNotDeclared, "%s does not declare a call to %s", m.Ref(), what)
}
