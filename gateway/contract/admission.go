package contract

import (
	"fmt"
	"slices"
	"time"

	"holon.dev/holon"
	"holon.dev/holon/journal"
)

// Verdict is the outcome of admission.
type Verdict string

// The three verdicts of checkCall (mandate.md §3).
const (
	VerdictAllow   Verdict = "allow"
	VerdictApprove Verdict = "approve"
	VerdictDeny    Verdict = "deny"
)

// MinRecordRuns is how many finished runs a measured record needs before
// require.min_success_rate applies to it.
const MinRecordRuns = 20

// CallRequest is what admission needs to know about the call itself.
type CallRequest struct {
	// Capability is the capability asked for, for a call by capability; ""
	// for a call that names the agent.
	Capability string
	// MaxCost is the caller's own ceiling, in the mandate's currency.
	MaxCost *journal.Amount
	// Delegated is true inside a delegated run, under a derived sub-mandate,
	// where nobody can approve.
	Delegated bool
	// Account is the account that owns the root mandate; an agent it
	// published itself is not "published by another account". Defaults to
	// the mandate's issuer.
	Account string
	// Now is the time of the call.
	Now time.Time
}

// AgentFacts is what the platform knows about an agent version beyond its
// manifest.
type AgentFacts struct {
	// Published is true for a version an account listed through the API;
	// agents shipped with the gateway are not.
	Published bool
	// Evaluated is true when the version passed its capability's suite.
	Evaluated bool
	// Runs and Succeeded are the measured record: finished runs, and those
	// that succeeded.
	Runs, Succeeded int64
}

// BudgetState is a mandate's spending at the moment of admission: over
// its lifetime, and in Window, the current window of a budget that renews
// by window (budget.window), whose spent and reserved are WindowSpent and
// WindowReserved.
type BudgetState struct {
	Spent, Reserved journal.Amount
	Window          Window
	WindowSpent     journal.Amount
	WindowReserved  journal.Amount
}

// Left is what admission may still reserve under m: its total less what
// is spent and reserved, and no more than the current window has left.
func (b BudgetState) Left(m *Mandate) journal.Amount {
	left := m.Total() - b.Spent - b.Reserved
	if m.Windowed() {
		left = journal.Min(left, m.PerWindow()-b.WindowSpent-b.WindowReserved)
	}
	return max(left, 0)
}

// Decision is the result of CheckCall.
type Decision struct {
	Verdict Verdict
	// Reason is the deny code (approval_required included); empty on allow
	// and approve.
	Reason string
	// Msg explains a deny in words a caller can act on.
	Msg string
	// WorstCase is W, in the mandate's currency: the amount to reserve. Zero
	// when a check before it failed.
	WorstCase journal.Amount
}

// Denied is the decision that denies a call with a code and a message
// (a check of CheckCall failed, or one the engine adds on top of it).
func Denied(code, format string, args ...any) Decision {
	return Decision{Verdict: VerdictDeny, Reason: code, Msg: fmt.Sprintf(format, args...)}
}

// CheckCall decides whether a call may happen under a mandate: allow,
// approve or deny with a reason. It runs the checks of mandate.md §3 in
// order, and the first that fails decides. It reads no clock and no store:
// the budget state and the facts are given.
func CheckCall(m *Mandate, a *Manifest, facts AgentFacts, budget BudgetState, req CallRequest) Decision {
	d := checkAgent(m, a, facts, req)
	if d.Verdict == VerdictDeny {
		return d
	}
	w := d.WorstCase
	// 8. per call
	// Denials from here on know W, and their receipts say it.
	denyW := func(code, format string, args ...any) Decision {
		d := Denied(code, format, args...)
		d.WorstCase = w
		return d
	}
	if pc := m.Budget.PerCall; pc != nil && w > *pc {
		return denyW(holon.CodeOverPerCall, "the worst case %s %s is above the mandate's per-call limit %s", w, m.Currency, pc)
	}
	// 9. total budget, counting every reservation; and the current
	// window's, the same way
	if m.Budget.Total != nil {
		used, err := journal.Sum(budget.Spent, budget.Reserved, w)
		if err != nil || used > m.Total() {
			left, _ := m.Total().Sub(budget.Spent)
			left, _ = left.Sub(budget.Reserved)
			return denyW(holon.CodeOverBudget, "the worst case %s %s is above what the mandate has left, %s", w, m.Currency, left)
		}
	}
	if m.Windowed() {
		used, err := journal.Sum(budget.WindowSpent, budget.WindowReserved, w)
		if err != nil || used > m.PerWindow() {
			left, _ := m.PerWindow().Sub(budget.WindowSpent)
			left, _ = left.Sub(budget.WindowReserved)
			return denyW(holon.CodeOverBudget, "the worst case %s %s is above what the mandate has left this %s, %s; the budget renews at %s",
				w, m.Currency, m.Budget.Window, left, budget.Window.End.Format(time.RFC3339))
		}
	}
	// 10. delegation depth
	if req.Delegated && m.MaxDepth() < 0 {
		return denyW(holon.CodeDelegationDepth, "the mandate allows no deeper delegation")
	}
	// 11. approval
	if ap := m.Approval; ap != nil && ap.Above != nil && w > *ap.Above {
		if req.Delegated {
			return Decision{Verdict: VerdictDeny, Reason: holon.CodeApprovalRequired, WorstCase: w,
				Msg: fmt.Sprintf("the worst case %s %s needs approval (above %s), and nobody can approve inside a delegated run", w, m.Currency, ap.Above)}
		}
		return Decision{Verdict: VerdictApprove, WorstCase: w}
	}
	return Decision{Verdict: VerdictAllow, WorstCase: w}
}

// CheckListing runs checks 1 to 8 of admission, as GET /v0/agents?mandate=
// does for each agent: why a caller could not call it, before calling.
func CheckListing(m *Mandate, a *Manifest, facts AgentFacts, req CallRequest) Decision {
	d := checkAgent(m, a, facts, req)
	if d.Verdict == VerdictDeny {
		return d
	}
	if pc := m.Budget.PerCall; pc != nil && d.WorstCase > *pc {
		return Denied(holon.CodeOverPerCall, "the worst case %s %s is above the mandate's per-call limit %s", d.WorstCase, m.Currency, pc)
	}
	return d
}

// checkAgent runs checks 1 to 7 and computes W.
func checkAgent(m *Mandate, a *Manifest, facts AgentFacts, req CallRequest) Decision {
	// 1. exists and is active
	if m == nil {
		return Denied(holon.CodeMandateInactive, "the mandate does not exist")
	}
	if !m.Active(req.Now) {
		if m.Revoked {
			return Denied(holon.CodeMandateInactive, "mandate %s is revoked", m.ID)
		}
		return Denied(holon.CodeMandateInactive, "mandate %s expired at %s", m.ID, m.Expires.UTC().Format(time.RFC3339))
	}
	// 2. deny lists
	for _, p := range m.denyAgents {
		if p.Match(a.ID, a.version) {
			return Denied(holon.CodeDeniedByMandate, "%s matches deny.agents %q", a.Ref(), p)
		}
	}
	for _, c := range a.Capabilities {
		for _, p := range m.denyCaps {
			if p.Match(c) {
				return Denied(holon.CodeDeniedByMandate, "capability %s of %s matches deny.capabilities %q", c, a.Ref(), p)
			}
		}
	}
	// 3. allow lists
	if !allowed(m, a, facts, req) {
		if req.Capability != "" {
			return Denied(holon.CodeNotAllowed, "neither %s nor capability %s is allowed by the mandate", a.Ref(), req.Capability)
		}
		return Denied(holon.CodeNotAllowed, "%s is not in the mandate's allow.agents", a.Ref())
	}
	// 4. requirements
	if r := m.Require; r != nil {
		if r.License == RequireOpen && !a.OpenSource() {
			return Denied(holon.CodeRequirementNotMet, "the mandate requires an open-source agent with source; %s is %s", a.Ref(), a.License)
		}
		if r.Evaluated && !facts.Evaluated {
			return Denied(holon.CodeRequirementNotMet, "the mandate requires an evaluated agent; %s has not passed its suite", a.Ref())
		}
		if r.MinSuccessRate != nil && facts.Runs >= MinRecordRuns {
			// succeeded/runs < rate, in integers: succeeded×10⁶ < rate×runs.
			if facts.Succeeded*journal.Micro < int64(*r.MinSuccessRate)*facts.Runs {
				return Denied(holon.CodeRequirementNotMet, "the mandate requires a success rate of %s; %s succeeded %d of %d runs", r.MinSuccessRate, a.Ref(), facts.Succeeded, facts.Runs)
			}
		}
	}
	// 5. data policy
	if msg := dataPolicyViolation(m.Data, a.Data); msg != "" {
		return Denied(holon.CodeDataPolicy, "%s: %s", a.Ref(), msg)
	}
	// 6. exchange rate
	rate, ok := m.Rate(a.Currency())
	if !ok {
		return Denied(holon.CodeNoFxRate, "the mandate has no fx rate for %s, the currency of %s", a.Currency(), a.Ref())
	}
	worst, err := journal.ConvertUp(a.WorstCase(), rate)
	if err != nil {
		// Beyond any amount: a lower max_cost still bounds the call, and
		// checks 8 and 9 refuse it otherwise.
		worst = journal.MaxAmount
	}
	// 7. a fixed price is never bought for less
	if req.MaxCost != nil && a.Pricing.Model == PricingPerRun {
		price, err := journal.ConvertUp(*a.Pricing.Amount, rate)
		if err != nil {
			price = journal.MaxAmount
		}
		if price > *req.MaxCost {
			return Denied(holon.CodeBelowFixedPrice, "%s costs %s %s per run, above max_cost %s", a.Ref(), price, m.Currency, req.MaxCost)
		}
	}
	if req.MaxCost != nil {
		worst = journal.Min(worst, *req.MaxCost)
	}
	return Decision{Verdict: VerdictAllow, WorstCase: worst}
}

// allowed is check 3. Routing by capability never reaches an agent another
// account published without allow.published, however the agent is allowed
// (an allow.agents of "*" included): an author cannot win routing and
// receive everyone's inputs. A call by name is unaffected.
func allowed(m *Mandate, a *Manifest, facts AgentFacts, req CallRequest) bool {
	if req.Capability != "" && facts.Published && !m.Allow.Published {
		account := req.Account
		if account == "" {
			account = m.Issuer
		}
		if a.NS() != account {
			return false
		}
	}
	for _, p := range m.allowAgents {
		if p.Match(a.ID, a.version) {
			return true
		}
	}
	if req.Capability == "" || !slices.Contains(a.Capabilities, req.Capability) {
		return false
	}
	for _, p := range m.allowCaps {
		if p.Match(req.Capability) {
			return true
		}
	}
	return false
}

// dataPolicyViolation says how an agent's attested data policy exceeds a
// mandate's rules, or "" when it is within them. An attestation the agent
// does not make cannot satisfy a rule.
func dataPolicyViolation(rules *DataRules, p *DataPolicy) string {
	if rules == nil {
		return ""
	}
	if p == nil {
		p = &DataPolicy{}
	}
	if rules.Retention != "" {
		limit, _ := ParseRetention(rules.Retention)
		if p.Retention == "" {
			return fmt.Sprintf("the mandate allows retention up to %s and the agent attests none", rules.Retention)
		}
		if keep, _ := ParseRetention(p.Retention); keep > limit {
			return fmt.Sprintf("the agent keeps data for %s, longer than the mandate's %s", p.Retention, rules.Retention)
		}
	}
	if len(rules.Regions) > 0 {
		if len(p.Regions) == 0 {
			return fmt.Sprintf("the mandate requires regions within %v and the agent attests none", rules.Regions)
		}
		for _, r := range p.Regions {
			if !slices.Contains(rules.Regions, r) {
				return fmt.Sprintf("the agent runs in %s, outside the mandate's regions %v", r, rules.Regions)
			}
		}
	}
	if rules.Training != nil && !*rules.Training {
		if p.Training == nil {
			return "the mandate refuses training on inputs and the agent does not attest training: false"
		}
		if *p.Training {
			return "the agent trains on inputs, which the mandate refuses"
		}
	}
	return ""
}
