package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"time"

	"holon.dev/holon/appliance"
	"holon.dev/holon/appliance/ops"
	"holon.dev/holon/backup"
	"holon.dev/holon/gateway"
	"holon.dev/holon/kv/pg"
	holontls "holon.dev/holon/tls"
)

// serveCommand runs the gateway.
type serveCommand struct {
	stderr io.Writer
	getenv func(string) string
	// ready, when set, receives the API's address once every listener
	// serves.
	ready func(addr string)
	// listening, when set, is told each listener's address: "api",
	// "http" (challenges and redirects) and "metrics".
	listening func(name, addr string)
	// devHandlers are agents compiled into an embedding program, besides
	// the shipped ones (appliance.Config.DevHandlers).
	devHandlers map[string]gateway.DevHandler
	// onStep, when set, is told each step of every call's lifecycle
	// (appliance.Config.OnStep): the crash tests kill the process there.
	onStep func(step, receipt string)
	// listenOn, when set, opens the listener of an address instead of
	// net.Listen: tests hand over listeners they bound once, so that no
	// other process can take a port between its choice and its use.
	listenOn func(addr string) (net.Listener, error)
}

func (c *serveCommand) Name() string     { return "serve" }
func (c *serveCommand) Synopsis() string { return "run the gateway (HTTP API, its own TLS, metrics)" }

// serveFlags are holon serve's flags.
type serveFlags struct {
	addr, httpAddr, metricsAddr string
	db, mandates                string
	hosted                      bool
	shutdown                    time.Duration
	bodyTimeout                 time.Duration
	idempotencyTTL              time.Duration
	store                       string
	storeLease                  time.Duration
	domains                     stringList
	acmeCA, acmeEmail, acmeRoot string
	tlsCert, tlsKey             string
}

func (c *serveCommand) flags() (*flag.FlagSet, *serveFlags) {
	f := &serveFlags{}
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(c.stderr)
	fs.StringVar(&f.addr, "addr", "", "address of the API (default 127.0.0.1:8080; :443 with --domain or --tls-cert)")
	fs.StringVar(&f.db, "db", "holon.db", "the database file (bbolt); certificates go to certs/ beside it")
	fs.StringVar(&f.store, "store", "", "serve from a PostgreSQL store instead of --db (postgres://…; --db still places certs/ and uploaded files)")
	fs.DurationVar(&f.storeLease, "store-lease", pg.DefaultLease, "with --store: how long this gateway's lease lasts unrenewed; the other gateways close a dead one's calls in flight within 1.5 times it")
	fs.StringVar(&f.mandates, "mandates", "", "a directory of mandate YAML files (default: the demo mandates)")
	fs.DurationVar(&f.shutdown, "shutdown-timeout", 30*time.Second, "on SIGTERM, how long running calls may take to finish")
	fs.DurationVar(&f.bodyTimeout, "body-timeout", defaultBodyTimeout, "how long a client may take to send a request body; slower ones are cut off")
	fs.DurationVar(&f.idempotencyTTL, "idempotency-ttl", appliance.DefaultIdempotencyTTL, "how long an Idempotency-Key is kept after its call finished: a call re-sent with it later runs again, as a new call, billed again (keys of calls still running are always kept)")
	fs.BoolVar(&f.hosted, "hosted", false, "serve other people: accounts, API keys, scoping, rate limits, moderation")
	fs.Var(&f.domains, "domain", "a name to obtain a certificate for by ACME and serve HTTPS as (repeatable)")
	fs.StringVar(&f.acmeCA, "acme-ca", "", "the ACME directory URL (default Let's Encrypt: "+holontls.DefaultCA+")")
	fs.StringVar(&f.acmeEmail, "acme-email", "", "the ACME account's email, for the CA's expiry notices")
	fs.StringVar(&f.acmeRoot, "acme-ca-root", "", "a PEM file of roots to trust for the ACME server's own HTTPS (a private CA)")
	fs.StringVar(&f.tlsCert, "tls-cert", "", "serve HTTPS with your own certificate: its PEM file (with the chain)")
	fs.StringVar(&f.tlsKey, "tls-key", "", "the key of --tls-cert, a PEM file")
	fs.StringVar(&f.httpAddr, "http-addr", "", "with TLS, the plain HTTP listener: ACME HTTP-01 challenges and redirects to HTTPS (default :80 with --domain)")
	fs.StringVar(&f.metricsAddr, "metrics-addr", "", "serve /metrics, with no key, on a listener of its own (a port alone binds loopback: 9090 is 127.0.0.1:9090)")
	fs.Usage = func() {
		fmt.Fprintln(c.stderr, `Usage: holon serve [flags]

Runs the gateway: the HTTP API of the gateway standard on --addr, state in
--db. Without --hosted it runs in dev mode (no authentication, the demo
mandates). Agents come from HOLON_REGISTRY (comma list: "agents" the
shipped agents, "examples" the demo agents, or directories of holon.yaml
files; default "agents"). Every mandate issuer gets HOLON_SIGNUP_CREDIT
(default 5.00) of demo credit once.

With --hosted: POST /v0/signup creates accounts and keys, every request is
scoped to its key, and HOLON_ADMIN_KEY is the operator's key. Settings:
HOLON_ENV (production refuses to start without HOLON_PUBLIC_URL,
HOLON_SITE_URL, HOLON_FILE_SECRET, HOLON_ADMIN_KEY, HOLON_TRUST_PROXY and a
writable --db; it also writes the logs as JSON lines), HOLON_TRUST_PROXY (1:
the client address is the last X-Forwarded-For entry), HOLON_RATE_ACCOUNT,
HOLON_RATE_ADDRESS and HOLON_RATE_SIGNUP ("600/min", "5/h"), HOLON_FX
("USD=0.92"), HOLON_GITHUB_CLIENT_ID and HOLON_GITHUB_CLIENT_SECRET
(optional).

TLS: with --domain the gateway obtains its certificates by ACME (HTTP-01 on
--http-addr, TLS-ALPN-01 on --addr), keeps them in certs/ beside --db,
renews them, serves HTTPS on --addr (default :443) and redirects HTTP to
HTTPS; HOLON_PUBLIC_URL defaults to https://<first domain> and
HOLON_TRUST_PROXY to 0. --tls-cert and --tls-key serve your own certificate
instead (read again when the files change). Without either, plain HTTP on
--addr, for a proxy in front.

Metrics: GET /metrics (Prometheus text format) is open in dev mode and
needs the admin key with --hosted; --metrics-addr serves it with no key on
a listener of its own.

Under systemd (Type=notify) it reports READY=1 once it serves, pings the
watchdog (WATCHDOG=1) after each check of its store, and on SIGTERM
reports STOPPING=1, stops accepting requests, lets running calls finish
for up to --shutdown-timeout, and stops; calls cut short are closed as
gateway_restarted, never billed, at the next start.

Flags:`)
		fs.PrintDefaults()
	}
	return fs, f
}

// check refuses contradictory flags and fills in the defaults that depend
// on the mode.
func (f *serveFlags) check() error {
	tlsOwn := f.tlsCert != "" || f.tlsKey != ""
	switch {
	case f.store != "" && !isPostgresURL(f.store):
		return errors.New("--store takes a PostgreSQL URL (postgres://user@host/db); the embedded store is --db")
	case len(f.domains) > 0 && tlsOwn:
		return errors.New("give --domain (certificates by ACME) or --tls-cert and --tls-key (your own), not both")
	case tlsOwn && (f.tlsCert == "" || f.tlsKey == ""):
		return errors.New("--tls-cert and --tls-key go together")
	case len(f.domains) == 0 && (f.acmeCA != "" || f.acmeEmail != "" || f.acmeRoot != ""):
		return errors.New("--acme-ca, --acme-email and --acme-ca-root need --domain")
	case !f.tls() && f.httpAddr != "":
		return errors.New("--http-addr serves challenges and redirects to HTTPS: it needs --domain or --tls-cert")
	case f.bodyTimeout <= 0:
		return errors.New("--body-timeout must be above zero")
	case f.idempotencyTTL <= 0:
		return errors.New("--idempotency-ttl must be above zero")
	}
	seen := map[string]bool{}
	for i, d := range f.domains {
		d = strings.ToLower(strings.TrimSpace(d))
		if err := holontls.CheckDomain(d); err != nil {
			return fmt.Errorf("--domain: %w", err)
		}
		if seen[d] {
			return fmt.Errorf("--domain: %s is given twice", d)
		}
		seen[d] = true
		f.domains[i] = d
	}
	if f.addr == "" {
		f.addr = "127.0.0.1:8080"
		if f.tls() {
			f.addr = ":443"
		}
	}
	if f.httpAddr == "" && len(f.domains) > 0 {
		f.httpAddr = ":80"
	}
	if f.metricsAddr != "" {
		f.metricsAddr = loopbackDefault(f.metricsAddr)
	}
	return nil
}

func (f *serveFlags) tls() bool { return len(f.domains) > 0 || f.tlsCert != "" }

// loopbackDefault binds a bare port ("9090", ":9090") to loopback: the
// metrics listener has no key, so it is private unless a host is named.
func loopbackDefault(addr string) string {
	if !strings.Contains(addr, ":") {
		return net.JoinHostPort("127.0.0.1", addr)
	}
	if host, port, err := net.SplitHostPort(addr); err == nil && host == "" {
		return net.JoinHostPort("127.0.0.1", port)
	}
	return addr
}

func (c *serveCommand) Run(ctx context.Context, args []string) error {
	fs, f := c.flags()
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		fs.Usage()
		return errUsage
	}
	if err := f.check(); err != nil {
		return err
	}
	cfg := appliance.Config{DB: f.db, OpenStore: openStore(f.store, f.storeLease), Backup: backup.StoreHandler, MandatesDir: f.mandates, Hosted: f.hosted, DevHandlers: c.devHandlers, OnStep: c.onStep, IdempotencyTTL: f.idempotencyTTL}
	if err := appliance.ConfigFromEnv(c.getenv, &cfg); err != nil {
		return err
	}
	log := ops.NewLogger(c.stderr, cfg.Env == appliance.EnvProduction, cfg.AdminKey, cfg.FileSecret, cfg.GitHubClientSecret, cfg.Agents.Summarize.APIKey)
	cfg.Logger = log
	if cfg.PublicURL == "" {
		cfg.PublicURL = defaultPublicURL(f, cfg.Env)
	}
	if cfg.TrustProxy == nil && f.tls() {
		// The gateway terminates TLS itself: no proxy appends
		// X-Forwarded-For, so a client could forge one.
		no := false
		cfg.TrustProxy = &no
	}
	storeFailed := make(chan error, 1)
	cfg.OnStoreFailure = func(err error) {
		select {
		case storeFailed <- err:
		default:
		}
	}
	app, err := appliance.Open(ctx, cfg)
	if err != nil {
		return err
	}
	defer app.Close()

	srv, err := c.listen(f, app, log)
	if err != nil {
		return err
	}
	defer srv.close()
	srv.start()
	if srv.acme != nil {
		if err := srv.acme.Manage(ctx); err != nil {
			return err
		}
	}

	notify := ops.NewNotifier(c.getenv)
	every, err := ops.WatchdogInterval(c.getenv, os.Getpid())
	if err != nil {
		log.Warn("no watchdog", "err", err)
	}
	wdCtx, stopWatchdog := context.WithCancel(context.WithoutCancel(ctx))
	defer stopWatchdog()
	go app.Watchdog(wdCtx, notify, every)
	if err := notify.Notify("READY=1", "STATUS=serving on "+srv.apiAddr()); err != nil {
		log.Warn("could not tell systemd the gateway is ready", "err", err)
	}
	log.Info("holon serving", srv.logAttrs("db", f.db, "registry", strings.Join(cfg.Registry, ","), "hosted", cfg.Hosted, "env", cfg.Env, "public_url", cfg.PublicURL)...)
	if c.listening != nil {
		for _, l := range srv.listeners() {
			c.listening(l.name, l.ln.Addr().String())
		}
	}
	if c.ready != nil {
		c.ready(srv.apiAddr())
	}

	select {
	case err := <-srv.errc:
		return fmt.Errorf("listener failed: %w", err)
	case err := <-storeFailed:
		return fmt.Errorf("store failed, stopping: %w", err)
	case <-ctx.Done():
	}
	_ = notify.Notify("STOPPING=1", "STATUS=letting running calls finish")
	log.Info("shutting down: no new requests; letting running calls finish", "timeout", f.shutdown.String())
	if drained := srv.drain(f.shutdown); !drained {
		n, err := app.HoldsOpen()
		if err != nil {
			log.Error("count calls still running", "err", err)
		}
		log.Warn("shutdown bound reached: calls still running are cut short, never billed: the next start closes those whose reservation is stored as gateway_restarted (a call to an in-process agent leaves no trace)",
			"calls", n, "timeout", f.shutdown.String())
	}
	stopWatchdog()
	log.Info("stopped")
	return nil
}

// defaultPublicURL is the gateway's origin when HOLON_PUBLIC_URL is unset:
// https://<first domain> (with the port when --addr is not on 443), the
// listening address outside production, else nothing (production then
// asks for the setting).
func defaultPublicURL(f *serveFlags, env string) string {
	if len(f.domains) > 0 {
		if _, port, err := net.SplitHostPort(f.addr); err == nil && port != "443" && port != "0" {
			return "https://" + net.JoinHostPort(f.domains[0], port)
		}
		return "https://" + f.domains[0]
	}
	if env == appliance.EnvProduction {
		return ""
	}
	// Remote orchestrators call back under this origin; in development
	// the listening address is it.
	u := devPublicURL(f.addr)
	if f.tlsCert != "" {
		u = "https" + strings.TrimPrefix(u, "http")
	}
	return u
}

// devPublicURL is the origin of a development gateway listening on addr,
// with an unspecified host replaced by loopback.
func devPublicURL(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "http://" + addr
	}
	if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
		host = "127.0.0.1"
	}
	return "http://" + net.JoinHostPort(host, port)
}
