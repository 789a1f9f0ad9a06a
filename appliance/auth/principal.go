package auth

import (
	"strings"
	"time"

	"holon.dev/holon"
	"holon.dev/holon/appliance/token"
	"holon.dev/holon/appliance/wire"
)

// Principal kinds.
const (
	KindHuman = token.KindHuman
	KindAgent = token.KindAgent
	KindNone  = "none"
	KindAdmin = "admin"
	// KindDev is the dev gateway's only principal: no authentication,
	// every resource visible.
	KindDev = "dev"
)

// Principal is who sends a request. Every lookup a handler makes goes
// through its scope.
type Principal struct {
	Kind string
	// Account is the handle a human or agent key belongs to.
	Account string
	// Mandate is the one mandate an agent key acts under.
	Mandate string
	// Key is the key's record (human and agent keys).
	Key *Key
}

// Dev is the dev gateway's principal.
func Dev() *Principal { return &Principal{Kind: KindDev} }

// Nobody is the principal of a request with no credential.
func Nobody() *Principal { return &Principal{Kind: KindNone} }

// Admin is the operator's principal.
func Admin() *Principal { return &Principal{Kind: KindAdmin} }

// Key is what the store knows of an account key: never the key itself.
type Key struct {
	Prefix  string    `json:"prefix"`
	Kind    string    `json:"kind"`
	Account string    `json:"account"`
	Mandate string    `json:"mandate,omitempty"`
	Ask     bool      `json:"ask_in_client,omitempty"`
	Created time.Time `json:"created"`
	// Expires is set on human keys from GitHub sign-in (30 days), and on
	// the keys of OAuth connections (their newest refresh token's expiry).
	Expires *time.Time `json:"expires,omitempty"`
	Revoked *time.Time `json:"revoked,omitempty"`
	// Client is the self-declared name of the OAuth client a key was
	// made for on the consent page; "" for other keys.
	Client string `json:"client,omitempty"`
	// Hash is the key's SHA-256, the record's own key in the store.
	Hash string `json:"hash"`
}

// Live reports whether the key may authenticate at now.
func (k *Key) Live(now time.Time) bool {
	return k.Revoked == nil && (k.Expires == nil || now.Before(*k.Expires))
}

// Access says which principals may use an endpoint.
type Access uint8

// What an endpoint lets in.
const (
	None Access = 1 << iota
	Human
	Agent
	Operator
	Anyone = None | Human | Agent | Operator
)

// May reports whether the principal may use an endpoint of access a.
func (p *Principal) May(a Access) bool {
	switch p.Kind {
	case KindDev:
		return true
	case KindNone:
		return a&None != 0
	case KindHuman:
		return a&Human != 0
	case KindAgent:
		return a&Agent != 0
	case KindAdmin:
		return a&Operator != 0
	}
	return false
}

// Describe names what may use an endpoint, for refusals.
func (a Access) Describe() string {
	var names []string
	if a&Human != 0 {
		names = append(names, "a human key (hlk_h_…)")
	}
	if a&Agent != 0 {
		names = append(names, "an agent key (hlk_a_…)")
	}
	if a&Operator != 0 {
		names = append(names, "the admin key")
	}
	return strings.Join(names, " or ")
}

// Scope is the name under which the principal's idempotency keys live:
// its key's hash ("per API key"), or its kind.
func (p *Principal) Scope() string {
	if p.Key != nil {
		return p.Key.Hash
	}
	return p.Kind
}

// SeesMandate reports whether a mandate (root or derived) is within the
// principal's scope: a human sees every mandate of its namespace, an
// agent key its one mandate and the sub-mandates derived from it.
func (p *Principal) SeesMandate(id string) bool {
	switch p.Kind {
	case KindDev:
		return true
	case KindHuman:
		ns, _, _ := strings.Cut(id, "/")
		return ns == p.Account
	case KindAgent:
		return id == p.Mandate || DerivedFrom(id, p.Mandate)
	}
	return false
}

// DerivedFrom reports whether id is a sub-mandate derived from root:
// root followed by one or more ".r<receipt>".
func DerivedFrom(id, root string) bool {
	rest, ok := strings.CutPrefix(id, root+".")
	if !ok {
		return false
	}
	for _, seg := range strings.Split(rest, ".") {
		if _, ok := holon.ReceiptSeq(seg); !ok {
			return false
		}
	}
	return true
}

// SeesAccount reports whether a balance is the principal's to see.
func (p *Principal) SeesAccount(name string) bool {
	switch p.Kind {
	case KindDev, KindAdmin:
		return true
	case KindHuman:
		return name == p.Account
	}
	return false
}

// Describe names the principal, for refusals.
func (p *Principal) Describe() string {
	switch p.Kind {
	case KindHuman:
		return "a human key"
	case KindAgent:
		return "an agent key"
	case KindAdmin:
		return "the admin key"
	}
	return "no key"
}

// View is the key as listings show it.
func (k *Key) View() wire.KeyView {
	return wire.KeyView{Prefix: k.Prefix, Kind: k.Kind, Mandate: k.Mandate, AskInClient: k.Ask, Created: k.Created, Expires: k.Expires, Client: k.Client}
}
