package gateway

import (
	"holon.dev/holon"
	"holon.dev/holon/journal"
)

// countSettled updates the per-version counters a settlement feeds, in the
// settlement's own transaction: the version's latency histogram and, when
// money moved (journaled is true), each lineage level's earnings, from the
// same split as the entry's lines. Earnings are therefore read, never
// computed from the journal, and holon verify checks them against it.
// With the earnings, the call counts in the rollups (rollups.go).
func countSettled(tx holon.Tx, v *AgentVersion, r *holon.Receipt, c CallRollup, charge journal.Amount, journaled bool) error {
	ref := v.Manifest.Ref()
	if err := tx.AddLatency(ref, r.DurationMS); err != nil {
		return err
	}
	if !journaled {
		return nil
	}
	levels, err := journal.SplitLevels(charge, v.Manifest.NS(), v.Chain)
	if err != nil {
		return err
	}
	// levels: the platform's fee, the creator, then one per upstream.
	shares, err := versionShares(v, levels)
	if err != nil {
		return err
	}
	if err := tx.AddEarnings(ref, r.Currency, 1, levels[1].Amount, 0); err != nil {
		return err
	}
	for i, up := range v.ChainRefs {
		if err := tx.AddEarnings(up, r.Currency, 0, 0, levels[i+2].Amount); err != nil {
			return err
		}
	}
	return AddSettlementRollups(tx, r, c, shares)
}
