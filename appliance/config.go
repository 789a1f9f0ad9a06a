package appliance

import (
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"golang.org/x/time/rate"

	"holon.dev/holon"
	"holon.dev/holon/appliance/agents"
	"holon.dev/holon/appliance/alerts"
	"holon.dev/holon/appliance/idempotency"
	"holon.dev/holon/appliance/ratelimit"
	"holon.dev/holon/appliance/token"
	"holon.dev/holon/gateway"
	"holon.dev/holon/gateway/remote"
	"holon.dev/holon/journal"
)

// Environments HOLON_ENV accepts.
const (
	EnvDevelopment = "development"
	EnvProduction  = "production"
)

// minSecretLen is the least length of HOLON_FILE_SECRET and HOLON_ADMIN_KEY
// in production ("32+ random characters").
const minSecretLen = 32

// Config is everything the appliance needs, passed down explicitly.
type Config struct {
	// DB is the path of the store.
	DB string
	// OpenStore opens the store at DB (kv.OpenStore, wired by cmd/holon):
	// the appliance knows the store only as a holon.Store.
	OpenStore holon.OpenStore
	// Backup, when set, makes the handler of GET /v0/admin/backup for the
	// store opened (backup.Handler, wired by cmd/holon); without it the
	// endpoint is not mounted.
	Backup func(holon.Store) http.Handler
	// Registry lists where agents come from: "agents" (the shipped ones),
	// "examples" (the demo agents), or directories of holon.yaml files.
	Registry []string
	// MandatesDir holds mandate YAML files; empty loads the demo mandates
	// in dev mode and none in hosted mode.
	MandatesDir string
	// SignupCredit is the demo credit each issuer gets once.
	SignupCredit journal.Amount
	// Logger gets internal errors, lifecycle messages and (hosted) one line
	// per request; never keys, inputs or outputs.
	Logger *slog.Logger
	// Now is the clock (time.Now when nil).
	Now func() time.Time
	// NoSync turns off fsync: for tests only.
	NoSync bool
	// OnStoreFailure is called when the store fails a write that must not
	// fail; the process should stop.
	OnStoreFailure func(error)
	// OnStep, when set, is told each step of every call's lifecycle
	// (gateway.Config.OnStep): the crash tests stop the process there.
	OnStep func(step, receipt string)
	// DevHandlers are agents compiled into the embedding program besides
	// the shipped ones, by the name a dev manifest runs (runtime.tool).
	DevHandlers map[string]gateway.DevHandler

	// Hosted turns on accounts, keys and scoping (holon serve --hosted).
	Hosted bool
	// Env is HOLON_ENV: EnvProduction applies the production checks.
	Env string
	// AdminKey is the operator's key (HOLON_ADMIN_KEY); empty: no admin.
	AdminKey string
	// PublicURL is the public https origin (HOLON_PUBLIC_URL); remote
	// orchestrators get delegation URLs under it.
	PublicURL string
	// Agents configures the shipped agents (summarize's API key and base URL).
	Agents agents.Options
	// Exclude lists agents left out of every registry source
	// (HOLON_EXCLUDE); nil means agents.DefaultExclude.
	Exclude []string
	// SiteURL is the public https site (HOLON_SITE_URL).
	SiteURL string
	// FileSecret signs file links and seals MCP request states
	// (HOLON_FILE_SECRET), each with a key of its own derived from it
	// (deriveKey).
	FileSecret string
	// TrustProxy says the gateway runs behind a proxy that appends the
	// client's address to X-Forwarded-For (HOLON_TRUST_PROXY=1); nil when
	// the setting is absent (treated as false).
	TrustProxy *bool
	// AllowPrivateEndpoints lifts the network guard for local development
	// (HOLON_ALLOW_PRIVATE_ENDPOINTS=1); refused in production.
	AllowPrivateEndpoints bool
	// GitHubClientID and GitHubClientSecret configure sign-in with GitHub;
	// without them sign-in and publishing are off, nothing else is.
	GitHubClientID, GitHubClientSecret string
	// PlatformFX are the exchange rates the platform sets on hosted
	// mandates (HOLON_FX, "USD=0.92,GBP=1.17").
	PlatformFX map[string]journal.Rate
	// Limits are the hosted rate limits (DefaultLimits when zero).
	Limits Limits
	// IdempotencyTTL is how long an Idempotency-Key is kept after its call
	// finished (holon serve --idempotency-ttl; DefaultIdempotencyTTL, 24
	// hours, when zero): re-sent later, the call runs again as a new one.
	IdempotencyTTL time.Duration
	// Rand is the source of keys and ids (crypto/rand when nil).
	Rand io.Reader

	// Publishing (gateway.md §7 "Publishing agents", "Accounts").
	//
	// GitHubURL and GitHubAPIURL are GitHub's web and REST API origins
	// (HOLON_GITHUB_URL, HOLON_GITHUB_API_URL; github.com's when empty): a
	// GitHub Enterprise Server is https://<host> and https://<host>/api/v3.
	GitHubURL, GitHubAPIURL string
	// GitHubHTTP is the client GitHub is reached with (a 10-second
	// timeout when nil).
	GitHubHTTP *http.Client
	// Resolver resolves the host names of published endpoints, at publish
	// time and at every connection (the system resolver when nil).
	Resolver remote.Resolver
	// RemoteRootCAs are the roots trusted for remote agents' certificates
	// and for OAuth clients' metadata documents (the system's when nil):
	// tests serve https agents and documents on loopback.
	RemoteRootCAs *x509.CertPool
	// Alerts is the schedule of budget alerts' webhook deliveries
	// (HOLON_ALERT_RETRY_FOR, HOLON_ALERT_FIRST_RETRY; appliance/alerts).
	Alerts alerts.Settings
	// Evaluations, catalogue and demo (evals.go, catalog.go, demo.go).
	//
	// PrivateEvals is HOLON_PRIVATE_EVALS: a directory laid out like
	// appliance/catalog/evals whose suites replace the shipped ones, capability by
	// capability. Empty: the shipped public samples only.
	PrivateEvals string
	// Records is HOLON_RECORDS=1: the catalogue also shows the sample
	// records shipped for the demo agents, labelled as samples (they are
	// not measurements). Off by default.
	Records bool
	// FilesDir is where uploaded files' bytes live (files.go); empty: the
	// directory <DB>.files beside the store.
	FilesDir string
}

// deriveKey derives a 32-byte key for one purpose ("file links", …) from
// HOLON_FILE_SECRET with HKDF-SHA256, so that each use of the secret has a
// key of its own; nil when no secret is set.
func (c *Config) deriveKey(purpose string) []byte {
	if c.FileSecret == "" {
		return nil
	}
	return token.DeriveKey([]byte(c.FileSecret), "holon "+purpose)
}

// DefaultIdempotencyTTL is how long an Idempotency-Key is kept after its
// call finished (or was interrupted) unless Config.IdempotencyTTL says
// otherwise: 24 hours, as Stripe keeps its keys.
const DefaultIdempotencyTTL = idempotency.DefaultTTL

// Limit is a token bucket: Burst requests at once, refilled at Rate per
// second.
type Limit = ratelimit.Limit

// Limits are the hosted gateway's rate limits (gateway.md §7 "Limits and
// platform rules"): per account, so that more keys buy nothing, and per
// client address, so that a forged X-Forwarded-For buys nothing either.
type Limits struct {
	// Account bounds the requests of one account, all its keys together.
	Account Limit
	// Address bounds the requests from one client address (an IPv6
	// address counts by its /64).
	Address Limit
	// Signup bounds the signups from one client address.
	Signup Limit
	// MaxTracked bounds how many limiters of each kind are kept in memory;
	// idle ones are evicted first.
	MaxTracked int
}

// DefaultLimits are the limits of a hosted gateway unless configured:
// 600 requests a minute per account, 1,200 per address, 5 signups an hour
// per address.
var DefaultLimits = Limits{
	Account:    Limit{Rate: 10, Burst: 600},
	Address:    Limit{Rate: 20, Burst: 1200},
	Signup:     Limit{Rate: rate.Every(12 * time.Minute), Burst: 5},
	MaxTracked: ratelimit.DefaultMaxTracked,
}

// DefaultPlatformFX is the platform's exchange rates into EUR unless
// HOLON_FX says otherwise.
var DefaultPlatformFX = map[string]journal.Rate{"USD": journal.MustParseRate("0.92")}

// ConfigFromEnv fills the environment's settings into a Config; it reports
// malformed values, and leaves the production requirements to Check:
//
//	HOLON_REGISTRY (comma list, default "agents"), HOLON_SIGNUP_CREDIT
//	(default 5.00), HOLON_ENV, HOLON_ADMIN_KEY, HOLON_PUBLIC_URL,
//	HOLON_SITE_URL, HOLON_FILE_SECRET, HOLON_TRUST_PROXY (0 or 1),
//	HOLON_ALLOW_PRIVATE_ENDPOINTS (0 or 1), HOLON_GITHUB_CLIENT_ID,
//	HOLON_GITHUB_CLIENT_SECRET, HOLON_GITHUB_URL, HOLON_GITHUB_API_URL,
//	HOLON_FX, HOLON_RATE_ACCOUNT, HOLON_RATE_ADDRESS and HOLON_RATE_SIGNUP
//	("600/min", "5/h"), HOLON_PRIVATE_EVALS and HOLON_RECORDS (0 or 1).
func ConfigFromEnv(getenv func(string) string, cfg *Config) error {
	var errs []error
	reg := getenv("HOLON_REGISTRY")
	if reg == "" {
		reg = agents.SetAgents
	}
	cfg.Registry = nil
	for _, r := range strings.Split(reg, ",") {
		if r = strings.TrimSpace(r); r != "" {
			cfg.Registry = append(cfg.Registry, r)
		}
	}
	cfg.SignupCredit = gateway.DefaultSignupCredit
	if s := getenv("HOLON_SIGNUP_CREDIT"); s != "" {
		a, err := journal.ParseAmount(s)
		if err != nil {
			errs = append(errs, fmt.Errorf("HOLON_SIGNUP_CREDIT: %w", err))
		}
		cfg.SignupCredit = a
	}
	switch env := getenv("HOLON_ENV"); env {
	case "", EnvDevelopment, "dev":
		cfg.Env = EnvDevelopment
	case EnvProduction:
		cfg.Env = EnvProduction
	default:
		errs = append(errs, fmt.Errorf("HOLON_ENV: %q is not production or development", env))
	}
	cfg.AdminKey = getenv("HOLON_ADMIN_KEY")
	cfg.PublicURL = getenv("HOLON_PUBLIC_URL")
	cfg.Agents = agents.OptionsFromEnv(getenv)
	if ex, err := agents.ParseExclude(getenv("HOLON_EXCLUDE")); err != nil {
		errs = append(errs, fmt.Errorf("HOLON_EXCLUDE: %w", err))
	} else {
		cfg.Exclude = ex
	}
	if a, err := alerts.SettingsFromEnv(getenv); err != nil {
		errs = append(errs, err)
	} else {
		cfg.Alerts = a
	}
	cfg.SiteURL = getenv("HOLON_SITE_URL")
	cfg.FileSecret = getenv("HOLON_FILE_SECRET")
	cfg.GitHubClientID = getenv("HOLON_GITHUB_CLIENT_ID")
	cfg.GitHubClientSecret = getenv("HOLON_GITHUB_CLIENT_SECRET")
	cfg.GitHubURL = getenv("HOLON_GITHUB_URL")
	cfg.GitHubAPIURL = getenv("HOLON_GITHUB_API_URL")
	cfg.TrustProxy = nil
	if s := getenv("HOLON_TRUST_PROXY"); s != "" {
		b, err := parseFlag(s)
		if err != nil {
			errs = append(errs, fmt.Errorf("HOLON_TRUST_PROXY: %w (1 behind a proxy, 0 exposed directly)", err))
		}
		cfg.TrustProxy = &b
	}
	if s := getenv("HOLON_ALLOW_PRIVATE_ENDPOINTS"); s != "" {
		b, err := parseFlag(s)
		if err != nil {
			errs = append(errs, fmt.Errorf("HOLON_ALLOW_PRIVATE_ENDPOINTS: %w", err))
		}
		cfg.AllowPrivateEndpoints = b
	}
	if s := getenv("HOLON_FX"); s != "" {
		fx, err := parseFX(s)
		if err != nil {
			errs = append(errs, fmt.Errorf("HOLON_FX: %w", err))
		}
		cfg.PlatformFX = fx
	}
	// Evaluations, catalogue and demo.
	cfg.PrivateEvals = getenv("HOLON_PRIVATE_EVALS")
	if s := getenv("HOLON_RECORDS"); s != "" {
		b, err := parseFlag(s)
		if err != nil {
			errs = append(errs, fmt.Errorf("HOLON_RECORDS: %w", err))
		}
		cfg.Records = b
	}

	cfg.Limits = DefaultLimits
	for _, l := range []struct {
		name string
		into *Limit
	}{
		{"HOLON_RATE_ACCOUNT", &cfg.Limits.Account},
		{"HOLON_RATE_ADDRESS", &cfg.Limits.Address},
		{"HOLON_RATE_SIGNUP", &cfg.Limits.Signup},
	} {
		if s := getenv(l.name); s != "" {
			lim, err := ParseLimit(s)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", l.name, err))
				continue
			}
			*l.into = lim
		}
	}
	return errors.Join(errs...)
}

func parseFlag(s string) (bool, error) {
	switch s {
	case "1":
		return true, nil
	case "0":
		return false, nil
	}
	return false, fmt.Errorf("%q is not 0 or 1", s)
}

// parseFX reads "USD=0.92,GBP=1.17".
func parseFX(s string) (map[string]journal.Rate, error) {
	fx := map[string]journal.Rate{}
	for _, part := range strings.Split(s, ",") {
		cur, r, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok || len(cur) != 3 || strings.ToUpper(cur) != cur {
			return nil, fmt.Errorf("%q is not CUR=rate, such as USD=0.92", part)
		}
		rt, err := journal.ParseRate(r)
		if err != nil || rt == 0 {
			return nil, fmt.Errorf("%s: %q is not a positive rate", cur, r)
		}
		fx[cur] = rt
	}
	return fx, nil
}

// ParseLimit reads a limit written "<n>/<s|min|h>": n requests at once,
// refilled evenly over the period ("600/min", "5/h").
func ParseLimit(s string) (Limit, error) {
	n, per, ok := strings.Cut(s, "/")
	count, err := strconv.Atoi(n)
	if !ok || err != nil || count < 1 {
		return Limit{}, fmt.Errorf("%q is not <count>/<s|min|h>, such as 600/min", s)
	}
	var d time.Duration
	switch per {
	case "s":
		d = time.Second
	case "min":
		d = time.Minute
	case "h":
		d = time.Hour
	default:
		return Limit{}, fmt.Errorf("%q: the period is s, min or h", s)
	}
	return Limit{Rate: rate.Limit(float64(count) / d.Seconds()), Burst: count}, nil
}

// Production reports whether the production checks apply.
func (c *Config) Production() bool { return c.Env == EnvProduction }

// trustsProxy reports whether a proxy of the operator's sets the
// X-Forwarded-* headers (HOLON_TRUST_PROXY=1).
func (c *Config) trustsProxy() bool { return c.TrustProxy != nil && *c.TrustProxy }

// GitHubSignIn reports whether sign-in with GitHub (and so publishing) is
// configured. Without it, only those features are off.
func (c *Config) GitHubSignIn() bool { return c.GitHubClientID != "" && c.GitHubClientSecret != "" }

// Check refuses a configuration the gateway must not start with. Outside
// production only malformed values are refused; in production
// (gateway.md §7 "Operating") every missing or weak setting is named, one
// per line. GitHub settings are never required.
func (c *Config) Check() error {
	var errs []string
	add := func(format string, args ...any) { errs = append(errs, fmt.Sprintf(format, args...)) }
	if c.PublicURL != "" {
		err := checkHTTPS(c.PublicURL)
		if err != nil && !c.Production() && strings.HasPrefix(c.PublicURL, "http://") &&
			checkHTTPS("https://"+strings.TrimPrefix(c.PublicURL, "http://")) == nil {
			// A development gateway without TLS is reached over http:
			// holon serve defaults the origin to its listening address.
			err = nil
		}
		if err != nil {
			add("HOLON_PUBLIC_URL: %v", err)
		}
	}
	if c.SiteURL != "" {
		if err := checkHTTPS(c.SiteURL); err != nil {
			add("HOLON_SITE_URL: %v", err)
		}
	}
	for _, gh := range []struct{ name, url string }{{"HOLON_GITHUB_URL", c.GitHubURL}, {"HOLON_GITHUB_API_URL", c.GitHubAPIURL}} {
		if u, err := url.Parse(gh.url); gh.url != "" && (err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "") {
			add("%s: %q is not an origin such as https://github.example.com", gh.name, gh.url)
		}
	}
	if c.IdempotencyTTL < 0 {
		add("--idempotency-ttl: %v is below zero: how long a finished Idempotency-Key is kept, such as 24h", c.IdempotencyTTL)
	}
	if c.Production() {
		if !c.Hosted {
			add("--hosted: HOLON_ENV=production serves other people; run holon serve --hosted")
		}
		if c.PublicURL == "" {
			add("HOLON_PUBLIC_URL: required, the public https origin (signed file links point there)")
		}
		if c.SiteURL == "" {
			add("HOLON_SITE_URL: required, the public https site (the console links to its terms and privacy pages)")
		}
		if err := checkSecret(c.FileSecret); err != nil {
			add("HOLON_FILE_SECRET: %v (it signs file links; keep it stable across restarts)", err)
		}
		if err := checkSecret(c.AdminKey); err != nil {
			add("HOLON_ADMIN_KEY: %v (it tops up demo credit and moderates)", err)
		} else if strings.HasPrefix(c.AdminKey, "hlk_") {
			add("HOLON_ADMIN_KEY: must not start with hlk_, which marks account keys")
		}
		if c.AdminKey != "" && c.AdminKey == c.FileSecret {
			add("HOLON_ADMIN_KEY: must differ from HOLON_FILE_SECRET")
		}
		if c.TrustProxy == nil {
			add("HOLON_TRUST_PROXY: required, 1 behind a proxy (else every visitor shares one rate limit), 0 if exposed directly")
		}
		if c.AllowPrivateEndpoints {
			add("HOLON_ALLOW_PRIVATE_ENDPOINTS: 1 is for local development only and refused in production")
		}
		if err := checkWritable(c.DB); err != nil {
			add("--db: %v", err)
		}
	}
	if len(errs) == 0 {
		return nil
	}
	sort.Strings(errs)
	return fmt.Errorf("refusing to start:\n  %s", strings.Join(errs, "\n  "))
}

func checkHTTPS(s string) error {
	u, err := url.Parse(s)
	if err != nil || u.Scheme != "https" || u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return fmt.Errorf("%q is not an https origin such as https://holon.example.com", s)
	}
	return nil
}

// checkSecret wants 32+ characters that look random: a long run of few
// distinct characters ("aaaa…", "1234512345…") is refused.
func checkSecret(s string) error {
	if s == "" {
		return errors.New("required, 32+ random characters")
	}
	if len(s) < minSecretLen {
		return fmt.Errorf("%d characters, want at least %d random ones", len(s), minSecretLen)
	}
	distinct := map[rune]bool{}
	for _, r := range s {
		distinct[r] = true
	}
	if len(distinct) < 10 {
		return fmt.Errorf("only %d distinct characters: not random enough, generate one with openssl rand -base64 32", len(distinct))
	}
	return nil
}

// checkWritable makes sure the database can be written: the file, when it
// exists, opens for writing; otherwise its directory accepts a new file.
func checkWritable(path string) error {
	if path == "" {
		return errors.New("required, the database file")
	}
	if fi, err := os.Stat(path); err == nil {
		if fi.IsDir() {
			return fmt.Errorf("%s is a directory, want the database file", path)
		}
		f, err := os.OpenFile(path, os.O_RDWR, 0)
		if err != nil {
			return fmt.Errorf("%s is not writable: %v", path, err)
		}
		return f.Close()
	} else if !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("%s: %v", path, err)
	}
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, ".holon-write-check-*")
	if err != nil {
		return fmt.Errorf("cannot create %s: directory %s is not writable: %v", path, dir, err)
	}
	name := f.Name()
	f.Close()
	return os.Remove(name)
}
