package gateway

import (
	"cmp"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"math/big"
	"math/bits"
	"slices"
	"sort"
	"strings"

	"holon.dev/holon"
	"holon.dev/holon/gateway/contract"
	"holon.dev/holon/journal"
)

// Listing pages: ListAgents answers at most MaxAgentLimit agents a page,
// DefaultAgentLimit unless asked.
const (
	DefaultAgentLimit = 50
	MaxAgentLimit     = 200
)

// AgentQuery is what ListAgents lists: the highest listed release of every
// agent (yanked versions are no longer listed) that matches it.
type AgentQuery struct {
	// Text keeps the agents whose id, summary, description or capabilities
	// contain it, whatever the case ("" keeps every agent).
	Text string
	// Capability keeps the agents that implement exactly this capability;
	// the preview is then that of a call by capability.
	Capability string
	// Mandate, when not "", is the id of the mandate the listing previews
	// admission under: worst cases in its currency, denied agents with the
	// reason. The caller checks that the principal may see it.
	Mandate string
	// Limit is the most agents on the page: DefaultAgentLimit when 0, at
	// most MaxAgentLimit.
	Limit int
	// Cursor is the Next of the page before ("" for the first page).
	Cursor string
}

// AgentPage is one page of a ranked listing.
type AgentPage struct {
	// Mandate is the mandate of the preview, nil without one.
	Mandate *contract.Mandate
	// Agents are the page's agents in rank order.
	Agents []AgentListing
	// Total is how many agents match the query, over every page.
	Total int
	// Next is the cursor of the page after this one, "" on the last page.
	Next string
	// Capabilities are the capabilities of every listed agent, matching
	// the query or not, sorted: what a search by capability can ask for.
	Capabilities []string
}

// AgentListing is one agent version in a listing, with what admission says
// of a call to it under the listing's mandate.
type AgentListing struct {
	Version *AgentVersion
	// Record is the version's measured record.
	Record holon.Record
	// WorstCase is the most one call can cost, in Currency: the mandate's
	// currency when the mandate allows the agent, the agent's own without
	// a mandate or when denied (a denied agent may have no rate into the
	// mandate's currency).
	WorstCase journal.Amount
	Currency  string
	// Denied is why the mandate refuses a call (admission checks 1 to 8,
	// contract.CheckListing), nil when it allows one or without a mandate.
	Denied *holon.Error
	// NeedsApproval is true when an allowed call's worst case is above the
	// mandate's approval threshold (check 11, for information: the call
	// itself decides with the budget of the moment).
	NeedsApproval bool

	cps *big.Rat // cost per successful run, the rank; nil when unknown
}

// Matcher is the query's filter, its text and capability, as ListAgents
// applies it (the mandate, the limit and the cursor aside).
func (q AgentQuery) Matcher() func(*AgentVersion) bool {
	text := strings.ToLower(q.Text)
	return func(v *AgentVersion) bool {
		return (q.Capability == "" || slices.Contains(v.Manifest.Capabilities, q.Capability)) && v.Matches(text)
	}
}

// ListAgents lists the agents matching q, ranked as capability calls rank
// their candidates (gateway.md §1): the agents the mandate allows first,
// by cost per successful run (worst case × runs / successes; no record
// counts as always succeeding, no success ranks last), then the denied
// ones the same way, ties by id. Filtering reads nothing; the mandate and
// the records of the matching agents are read in one transaction, and the
// page holds at most q.Limit of them.
func (e *Engine) ListAgents(ctx context.Context, q AgentQuery) (AgentPage, error) {
	var page AgentPage
	limit := q.Limit
	switch {
	case limit == 0:
		limit = DefaultAgentLimit
	case limit < 1 || limit > MaxAgentLimit:
		return page, holon.Errorf(holon.CodeInvalidRequest, "limit must be a whole number from 1 to %d", MaxAgentLimit)
	}
	var after *rankKey
	if q.Cursor != "" {
		k, err := parseCursor(q.Cursor)
		if err != nil {
			return page, err
		}
		after = &k
	}
	if err := ctx.Err(); err != nil {
		return page, err
	}
	match := q.Matcher()
	var matched []*AgentVersion
	for _, v := range e.registry.Latest() {
		if match(v) {
			matched = append(matched, v)
		}
	}
	page.Capabilities = e.registry.Capabilities()

	records := make([]holon.Record, len(matched))
	var loadErr error
	err := e.store.View(func(tx holon.Tx) error {
		if q.Mandate != "" {
			if page.Mandate, loadErr = e.loadMandate(tx, q.Mandate); loadErr != nil {
				return nil
			}
		}
		for i, v := range matched {
			var err error
			if records[i], err = tx.Record(v.Manifest.Ref()); err != nil {
				return fmt.Errorf("record of %s: %w", v.Manifest.Ref(), err)
			}
		}
		return nil
	})
	// A mandate read empty by a View that failed may be there: the
	// store's error, not not_found.
	if errors.Is(loadErr, holon.ErrNotFound) && err == nil {
		return page, holon.Errorf(holon.CodeNotFound, "no mandate %s", q.Mandate)
	}
	if loadErr != nil && err == nil {
		return page, loadErr
	}
	if err != nil {
		return page, err
	}
	req := contract.CallRequest{Capability: q.Capability, Now: e.now()}
	all := make([]AgentListing, len(matched))
	for i, v := range matched {
		all[i] = preview(page.Mandate, v, records[i], req)
	}
	sort.Slice(all, func(i, j int) bool { return compareRank(all[i].key(), all[j].key()) < 0 })
	page.Total = len(all)
	start := 0
	if after != nil {
		start = sort.Search(len(all), func(i int) bool { return compareRank(all[i].key(), *after) > 0 })
	}
	end := min(start+limit, len(all))
	page.Agents = all[start:end]
	if end < len(all) {
		page.Next = formatCursor(all[end-1].key())
	}
	return page, nil
}

// PreviewAgent is what a mandate says of a call to one version (as
// ListAgents says it of each agent), with the version's record, read in
// one transaction.
func (e *Engine) PreviewAgent(ctx context.Context, mandate string, v *AgentVersion) (AgentListing, *contract.Mandate, error) {
	if err := ctx.Err(); err != nil {
		return AgentListing{}, nil, err
	}
	var m *contract.Mandate
	var rec holon.Record
	err := e.store.View(func(tx holon.Tx) error {
		var err error
		if m, err = e.loadMandate(tx, mandate); err != nil {
			return err
		}
		rec, err = tx.Record(v.Manifest.Ref())
		return err
	})
	if errors.Is(err, holon.ErrNotFound) && m == nil {
		return AgentListing{}, nil, holon.Errorf(holon.CodeNotFound, "no mandate %s", mandate)
	}
	if err != nil {
		return AgentListing{}, nil, err
	}
	return preview(m, v, rec, contract.CallRequest{Now: e.now()}), m, nil
}

// preview runs the listing's admission checks (CheckListing) for one
// version under m (none when m is nil).
func preview(m *contract.Mandate, v *AgentVersion, rec holon.Record, req contract.CallRequest) AgentListing {
	a := v.Manifest
	l := AgentListing{Version: v, Record: rec, WorstCase: a.WorstCase(), Currency: a.Currency()}
	if m != nil {
		d := contract.CheckListing(m, a, v.Measured(rec), req)
		if d.Verdict == contract.VerdictDeny {
			l.Denied = &holon.Error{Code: d.Reason, Msg: d.Msg}
		} else {
			l.WorstCase, l.Currency = d.WorstCase, m.Currency
			l.NeedsApproval = m.Approval != nil && m.Approval.Above != nil && d.WorstCase > *m.Approval.Above
		}
	}
	l.cps = costPerSuccess(l.WorstCase, rec)
	return l
}

// rankKey is where a candidate stands in a ranking: allowed before
// denied, then by cost per successful run (unknown last), then by id.
type rankKey struct {
	denied bool
	cps    *big.Rat
	id     string
}

func (l AgentListing) key() rankKey {
	return rankKey{denied: l.Denied != nil, cps: l.cps, id: l.Version.Manifest.ID}
}

// compareRank orders two candidates, for a call by capability and for a
// listing alike.
func compareRank(a, b rankKey) int {
	if a.denied != b.denied {
		if a.denied {
			return 1
		}
		return -1
	}
	if (a.cps == nil) != (b.cps == nil) {
		if a.cps == nil {
			return 1
		}
		return -1
	}
	if a.cps != nil {
		if c := compareRat(a.cps, b.cps); c != 0 {
			return c
		}
	}
	return strings.Compare(a.id, b.id)
}

// compareRat is a.Cmp(b) without its allocations when both fractions'
// parts fit in 64 bits (every cost per success of a real record): the
// cross products are compared in 128 bits. Ranking compares n log n pairs.
func compareRat(a, b *big.Rat) int {
	an, ad, aok := ratParts(a)
	bn, bd, bok := ratParts(b)
	if !aok || !bok {
		return a.Cmp(b)
	}
	h1, l1 := bits.Mul64(an, bd)
	h2, l2 := bits.Mul64(bn, ad)
	switch {
	case h1 != h2:
		return cmp.Compare(h1, h2)
	default:
		return cmp.Compare(l1, l2)
	}
}

func ratParts(r *big.Rat) (num, den uint64, ok bool) {
	if !r.Num().IsUint64() {
		return 0, 0, false
	}
	if r.IsInt() { // Denom would allocate a 1
		return r.Num().Uint64(), 1, true
	}
	if !r.Denom().IsUint64() {
		return 0, 0, false
	}
	return r.Num().Uint64(), r.Denom().Uint64(), true
}

// A cursor is the rank key of a page's last agent, so the next page starts
// after it even when that agent has since gone or moved.
func formatCursor(k rankKey) string {
	d, cps := "a", "-"
	if k.denied {
		d = "d"
	}
	if k.cps != nil {
		cps = k.cps.RatString()
	}
	return base64.RawURLEncoding.EncodeToString([]byte(d + " " + cps + " " + k.id))
}

func parseCursor(s string) (rankKey, error) {
	bad := holon.Errorf(holon.CodeInvalidRequest, "cursor %q is not one a listing answered as next", s)
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return rankKey{}, bad
	}
	parts := strings.SplitN(string(b), " ", 3)
	if len(parts) != 3 || parts[0] != "a" && parts[0] != "d" || parts[2] == "" {
		return rankKey{}, bad
	}
	k := rankKey{denied: parts[0] == "d", id: parts[2]}
	if parts[1] != "-" {
		r, ok := parseRatio(parts[1])
		if !ok {
			return rankKey{}, bad
		}
		k.cps = r
	}
	return k, nil
}

// parseRatio reads what big.Rat.RatString writes for a cost per success:
// digits, or digits/digits. big.Rat.SetString would also take exponents,
// which a client could make as large as it likes.
func parseRatio(s string) (*big.Rat, bool) {
	num, den, frac := strings.Cut(s, "/")
	digits := func(x string) bool {
		return x != "" && len(x) <= 40 && strings.Trim(x, "0123456789") == ""
	}
	if !digits(num) || frac && (!digits(den) || strings.Trim(den, "0") == "") {
		return nil, false
	}
	r, ok := new(big.Rat).SetString(s)
	return r, ok
}
