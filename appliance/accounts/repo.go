package accounts

import (
	"context"
	"errors"
	"io"
	"time"

	"holon.dev/holon"
	"holon.dev/holon/appliance/auth"
	"holon.dev/holon/gateway"
	"holon.dev/holon/journal"
)

// Repo is the accounts room: the store it keeps accounts, keys and the
// moderation log in, and what a new account is made with. Its reads and
// writes inside a caller's transaction are the package's functions
// (Get, Put, PutKey, Keys, …); what needs its configuration (handles, new
// accounts, keys drawn, principals) is its methods.
type Repo struct {
	store  holon.Store
	engine *gateway.Engine
	now    func() time.Time
	rand   io.Reader
	// authors are the namespaces of every agent the registry loaded,
	// shipped or not, yanked or not: nobody may sign up with one.
	authors map[string]bool
	// starterAllow is allow.agents of a new account's sandbox: the
	// namespaces of the shipped agents.
	starterAllow []string
	fx           map[string]journal.Rate
	// keys is what the key check read of keys and their accounts, by the
	// stores' change numbers; keyRecs and acctRecs what it decoded of key
	// and account records, by their stored bytes (keycheck.go).
	keys     stamped[keyState]
	keyRecs  stamped[auth.Key]
	acctRecs stamped[bool]
}

// Config is what a Repo is made with.
type Config struct {
	Store  holon.Store
	Engine *gateway.Engine
	Now    func() time.Time
	Rand   io.Reader
	// Authors are the namespaces of every agent listed; Shipped those of
	// the agents shipped with the gateway (a new account's sandbox may
	// call them).
	Authors map[string]bool
	Shipped []string
	// FX are the platform's exchange rates, the fx of every hosted
	// mandate.
	FX map[string]journal.Rate
}

// New returns the repository over cfg.Store.
func New(cfg Config) *Repo {
	r := &Repo{store: cfg.Store, engine: cfg.Engine, now: cfg.Now, rand: cfg.Rand, authors: cfg.Authors, fx: cfg.FX}
	for _, ns := range cfg.Shipped {
		r.starterAllow = append(r.starterAllow, ns+"/*")
	}
	return r
}

// ErrCollision asks for another draw: a random name just drawn (a key's
// prefix in its account, a key's hash, a client id) is taken already, so
// rare that it is a retry, not an error.
var ErrCollision = errors.New("drawn name collides")

// DrawUpdate runs fn in one update of store, and again, up to three more
// times, while it fails with ErrCollision: fn draws its random names
// (keys, ids) itself, so each run tries new ones. It is the one loop
// for every update that stores something named at random.
func DrawUpdate(ctx context.Context, store holon.Store, fn func(tx holon.Tx) error) error {
	for attempt := 0; ; attempt++ {
		err := store.Update(ctx, fn)
		if errors.Is(err, ErrCollision) && attempt < 3 {
			continue
		}
		return err
	}
}

// View runs fn in a read transaction of the repository's store.
func (r *Repo) View(fn func(tx holon.Tx) error) error { return r.store.View(fn) }

// Update runs fn in a write transaction, drawing again on ErrCollision
// (DrawUpdate).
func (r *Repo) Update(ctx context.Context, fn func(tx holon.Tx) error) error {
	return DrawUpdate(ctx, r.store, fn)
}
