package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"time"

	"holon.dev/holon/appliance"
)

// serveCommand runs the gateway.
type serveCommand struct {
	stderr io.Writer
	getenv func(string) string
	// ready, when set, receives the address the server listens on.
	ready func(addr string)
}

func (c *serveCommand) Name() string     { return "serve" }
func (c *serveCommand) Synopsis() string { return "run the gateway (HTTP API)" }

func (c *serveCommand) Run(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(c.stderr)
	addr := fs.String("addr", "127.0.0.1:8080", "address to listen on")
	db := fs.String("db", "holon.db", "the database file (bbolt)")
	mandates := fs.String("mandates", "", "a directory of mandate YAML files (default: the demo mandates)")
	shutdown := fs.Duration("shutdown-timeout", 30*time.Second, "how long running calls may take to finish on SIGTERM")
	hosted := fs.Bool("hosted", false, "serve other people: accounts, API keys, scoping, rate limits, moderation")
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
writable --db), HOLON_TRUST_PROXY (1: the client address is the last
X-Forwarded-For entry), HOLON_RATE_ACCOUNT, HOLON_RATE_ADDRESS and
HOLON_RATE_SIGNUP ("600/min", "5/h"), HOLON_FX ("USD=0.92"),
HOLON_GITHUB_CLIENT_ID and HOLON_GITHUB_CLIENT_SECRET (optional).

Flags:`)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		fs.Usage()
		return errUsage
	}
	log := slog.New(slog.NewTextHandler(c.stderr, nil))
	cfg := appliance.Config{DB: *db, MandatesDir: *mandates, Logger: log, Hosted: *hosted}
	if err := appliance.ConfigFromEnv(c.getenv, &cfg); err != nil {
		return err
	}
	if cfg.PublicURL == "" && cfg.Env != appliance.EnvProduction {
		// Remote orchestrators call back under this origin; in development
		// the listening address is it.
		cfg.PublicURL = devPublicURL(*addr)
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

	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: app.Handler(), ReadHeaderTimeout: 10 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	log.Info("holon serving", "addr", ln.Addr().String(), "db", *db, "registry", cfg.Registry, "hosted", cfg.Hosted, "env", cfg.Env)
	if c.ready != nil {
		c.ready(ln.Addr().String())
	}
	select {
	case err := <-errc:
		return err
	case err := <-storeFailed:
		srv.Close()
		return fmt.Errorf("store failed, stopping: %w", err)
	case <-ctx.Done():
	}
	log.Info("shutting down: letting running calls finish", "timeout", shutdown.String())
	sctx, cancel := context.WithTimeout(context.Background(), *shutdown)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return nil
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
