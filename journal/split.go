package journal

import "fmt"

// PlatformAccount is the account that receives the platform fee.
const PlatformAccount = "holon"

// MaxChain is the longest royalty chain a split accepts (manifest.md §8).
const MaxChain = 8

// Share is one account's part of a paid call, as listed in a receipt's splits.
type Share struct {
	To     string `json:"to"`
	Amount Amount `json:"amount"`
}

// Upstream is one level of a royalty chain: the author of the upstream
// version and that version's royalties.forks rate.
type Upstream struct {
	Account string
	Rate    Rate
}

// Split divides a price between the platform, the creator and the royalty
// chain (chain[0] is the version the creator forked), as in manifest.md §8.
//
// The platform takes floor(P × 10%); of the rest, C0, each level i takes
// Ri = floor(R(i-1) × rate i) of the level below it (R0 = C0), keeping
// Ri − R(i+1). Shares come in the order platform, creator, upstream 1..n;
// zero shares are left out, and an account that appears more than once keeps
// its first position with the amounts merged. The shares sum to exactly the
// price; a price of 0 has no shares.
func Split(price Amount, creator string, chain []Upstream) ([]Share, error) {
	levels, err := SplitLevels(price, creator, chain)
	if err != nil || levels == nil {
		return nil, err
	}
	// Merge before dropping zeros, so an account's position depends on who it
	// is in the chain, not on whether its first share happened to round to 0.
	return dropZero(merge(levels)), nil
}

// SplitLevels is Split before shares to the same account are merged and
// zero shares dropped: the platform's fee first, then exactly one share per
// level (the creator, upstream 1..n), so that level i's share is what the
// version at that level of the lineage earned. A price of 0 has no levels.
func SplitLevels(price Amount, creator string, chain []Upstream) ([]Share, error) {
	if price < 0 {
		return nil, fmt.Errorf("split %s: negative price, want 0 or more", price)
	}
	if creator == "" {
		return nil, fmt.Errorf("split %s: creator has no account name: %w", price, ErrBadAccount)
	}
	if len(chain) > MaxChain {
		return nil, fmt.Errorf("split %s: royalty chain of %d levels, want at most %d", price, len(chain), MaxChain)
	}
	for i, u := range chain {
		if u.Account == "" {
			return nil, fmt.Errorf("split %s: upstream %d has no account name: %w", price, i+1, ErrBadAccount)
		}
		if u.Rate < 0 || u.Rate > One {
			return nil, fmt.Errorf("split %s: upstream %d (%s) has royalty rate %s, want 0 to 1", price, i+1, u.Account, u.Rate)
		}
	}
	if price == 0 {
		return nil, nil
	}

	fee, err := MulFloor(price, PlatformFee)
	if err != nil {
		return nil, fmt.Errorf("split %s: platform fee: %w", price, err)
	}
	all := make([]Share, 0, len(chain)+2)
	all = append(all, Share{To: PlatformAccount, Amount: fee})
	// revenue is what the current holder received before paying its own upstream.
	holder, revenue := creator, price-fee
	for i, u := range chain {
		royalty, err := MulFloor(revenue, u.Rate)
		if err != nil {
			return nil, fmt.Errorf("split %s: royalty to upstream %d: %w", price, i+1, err)
		}
		all = append(all, Share{To: holder, Amount: revenue - royalty})
		holder, revenue = u.Account, royalty
	}
	return append(all, Share{To: holder, Amount: revenue}), nil
}

// merge adds the amounts of shares to the same account into its first
// position. The amounts must be non-negative and sum to at most MaxAmount.
func merge(shares []Share) []Share {
	out := make([]Share, 0, len(shares))
	for _, s := range shares {
		if i := indexOf(out, s.To); i >= 0 {
			out[i].Amount += s.Amount
			continue
		}
		out = append(out, s)
	}
	return out
}

func indexOf(shares []Share, account string) int {
	for i, s := range shares {
		if s.To == account {
			return i
		}
	}
	return -1
}

func dropZero(shares []Share) []Share {
	out := shares[:0]
	for _, s := range shares {
		if s.Amount != 0 {
			out = append(out, s)
		}
	}
	return out
}
