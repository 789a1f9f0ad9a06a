package signin

import (
	"io"
	"log/slog"
	"net/http"
	"time"

	"holon.dev/holon"
	"holon.dev/holon/appliance/accounts"
	"holon.dev/holon/appliance/github"
	"holon.dev/holon/appliance/origin"
	"holon.dev/holon/appliance/ratelimit"
	"holon.dev/holon/appliance/web"
)

// Config is what the sign-in room is wired with.
type Config struct {
	// Store keeps sign-in's states, login codes and GitHub links
	// (holon.BucketSignIn).
	Store holon.Store
	// Sessions keeps the console sessions (StoreSessions over Store when
	// nil).
	Sessions SessionStore
	// Accounts is the accounts room.
	Accounts *accounts.Repo
	// GitHub is the GitHub app's client; nil when none is configured.
	GitHub *github.Client
	// Origin is the gateway's origin rule (GitHub's callback URL, the
	// cookies' Secure flag).
	Origin *origin.Rule
	// PublicURL is HOLON_PUBLIC_URL without a trailing slash ("" for a
	// redirect relative to the request): where the console is.
	PublicURL string
	// Signups is the limit of new accounts per client address, and
	// TrustProxy whether that address comes from X-Forwarded-For.
	Signups    ratelimit.Limiter
	TrustProxy bool
	// AdminKey is the SHA-256 of the admin key (nil: none); the operator
	// signs in to the console with it.
	AdminKey []byte
	// Claimed runs in the transaction that lets a GitHub sign-in take
	// over an account made with an unproved email: what other rooms hold
	// for the account (the OAuth codes not yet traded) is dropped there.
	Claimed func(tx holon.Tx, handle string) error
	Now     func() time.Time
	Rand    io.Reader
	Log     *slog.Logger
}

// Service is the sign-in room of a hosted gateway.
type Service struct {
	store      holon.Store
	sessions   SessionStore
	accounts   *accounts.Repo
	github     *github.Client
	origin     *origin.Rule
	publicURL  string
	signups    ratelimit.Limiter
	trustProxy bool
	adminKey   []byte
	claimed    func(tx holon.Tx, handle string) error
	now        func() time.Time
	rand       io.Reader
	log        *slog.Logger
}

// New is the sign-in room over cfg.
func New(cfg Config) *Service {
	s := &Service{store: cfg.Store, sessions: cfg.Sessions, accounts: cfg.Accounts, github: cfg.GitHub, origin: cfg.Origin,
		publicURL: cfg.PublicURL, signups: cfg.Signups, trustProxy: cfg.TrustProxy, adminKey: cfg.AdminKey,
		claimed: cfg.Claimed, now: cfg.Now, rand: cfg.Rand, log: cfg.Log}
	if s.sessions == nil {
		s.sessions = StoreSessions{Store: cfg.Store}
	}
	return s
}

// GitHubSignIn reports whether a GitHub app is configured.
func (s *Service) GitHubSignIn() bool { return s.github != nil }

func (s *Service) fail(w http.ResponseWriter, r *http.Request, err error) { web.Fail(s.log, w, r, err) }
