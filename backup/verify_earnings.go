package backup

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"holon.dev/holon"
	"holon.dev/holon/journal"
)

// Checks of the per-version counters a settlement writes.
const (
	CheckEarnings = "earnings"
	CheckLatency  = "latency"
)

// earnings checks the earnings counters against the journal: for every
// author, what the counters of its versions say it earned (own shares and
// royalties) is exactly what the settle entries paid it less what the
// refunds took back, and each version's paid calls are its settle entries
// but those refunded in full. Settlements journaled
// before the counters existed (below meta earnings_from) are not counted.
func (v *verifier) earnings() error {
	c := v.c[CheckEarnings]
	counted := map[string]journal.Amount{}
	calls := map[string]int64{}
	refs := 0
	err := v.tx.ForEachEarnings("", func(ref string, e holon.Earnings) error {
		refs++
		ns, _, _ := strings.Cut(ref, "/")
		for _, x := range e {
			counted[ns] += x.Own + x.Royalties
			calls[ref] += x.PaidCalls
		}
		return nil
	})
	if err != nil {
		return err
	}
	from, started := v.tx.EarningsFrom()
	if !started {
		if refs > 0 {
			c.fail("%d versions have earnings counters, but the store does not say from which settlement they count (meta earnings_from)", refs)
		}
		c.Covered = "no settlement counted yet"
		return nil
	}
	paid := map[string]journal.Amount{}
	settled := map[string]int64{}
	entries := 0
	err = v.tx.ForEachReceipt(func(r *holon.Receipt) error {
		if err := v.tick(); err != nil {
			return err
		}
		if !r.Billed || r.Cost.Own <= 0 || r.Agent == nil {
			return nil
		}
		row, err := v.tx.EntryByKey("settle:" + r.ID)
		if errors.Is(err, holon.ErrNotFound) {
			return nil // nothing moved (the settlements check says whether that is right)
		}
		if err != nil {
			return err
		}
		if row.Seq < from {
			return nil
		}
		entries++
		// A call refunded in full is no longer a paid call.
		if v.refunded[r.ID] < r.Cost.Own {
			settled[*r.Agent]++
		}
		for _, l := range row.Lines {
			got := l.Amount
			if l.Account == r.Payer {
				got += r.Cost.Own // the payer's debit, netted with its own share
			}
			if l.Account != journal.PlatformAccount && got != 0 {
				paid[l.Account] += got
			}
		}
		// Less what the call's refunds took back.
		for acct, a := range v.refundedFrom[r.ID] {
			if acct != journal.PlatformAccount {
				paid[acct] += a
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	for _, acct := range unionKeys(counted, paid) {
		if counted[acct] != paid[acct] {
			c.fail("account %s: its versions' earnings counters add up to %s, the settle entries paid it %s", acct, counted[acct], paid[acct])
		}
	}
	for _, ref := range unionKeys(calls, settled) {
		if calls[ref] != settled[ref] {
			c.fail("%s: %d paid calls counted, %d settle entries", ref, calls[ref], settled[ref])
		}
	}
	c.Covered = fmt.Sprintf("%d versions' counters against %d settle entries from journal row %d", refs, entries, from)
	return nil
}

// latency checks each version's latency histogram against its call
// events: every run that settled (all but those closed unsettled,
// holon.ClosedUnsettled) in the
// bucket of its duration, from the first event counted (meta latency_from).
func (v *verifier) latency() error {
	c := v.c[CheckLatency]
	from, started := v.tx.LatencyFrom()
	want := map[string][]int64{}
	err := v.tx.ForEachEvent(func(ev *holon.Event) error {
		if err := v.tick(); err != nil {
			return err
		}
		if !started || ev.Seq < from || holon.ClosedUnsettled(ev.Error) {
			return nil
		}
		h := want[ev.Agent]
		if h == nil {
			h = make([]int64, len(holon.LatencyBoundsMS)+1)
			want[ev.Agent] = h
		}
		h[holon.LatencyBucket(ev.DurationMS)]++
		return nil
	})
	if err != nil {
		return err
	}
	n := 0
	err = v.tx.ForEachLatency(func(ref string, l holon.Latency) error {
		n++
		w := want[ref]
		if w == nil {
			w = make([]int64, len(holon.LatencyBoundsMS)+1)
		}
		if !slices.Equal(l.Counts, w) {
			c.fail("%s: latency histogram %v, its settled events make %v", ref, l.Counts, w)
		}
		delete(want, ref)
		return nil
	})
	if err != nil {
		return err
	}
	for _, ref := range sortedKeys(want) {
		c.fail("%s has settled events but no latency histogram", ref)
	}
	c.Covered = fmt.Sprintf("%d histograms are the durations of their settled call events", n)
	if started {
		c.Covered += fmt.Sprintf(" from event %d", from)
	}
	return nil
}

// unionKeys are the keys of a and b, sorted.
func unionKeys[V any](a, b map[string]V) []string {
	seen := map[string]V{}
	for k, x := range a {
		seen[k] = x
	}
	for k, x := range b {
		seen[k] = x
	}
	return sortedKeys(seen)
}
