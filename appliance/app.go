// Package appliance is the composition root of the product around the
// engine: Config, Open and App. It opens the store, wires the registry
// and the runtimes into a gateway.Engine, wires the rooms around it
// (appliance/*: each package doc says what it may import, and no room
// imports this one), mounts their routes behind the front door
// (appliance/front) and runs one group of background workers under one
// context.
package appliance

import (
	"context"
	"crypto/rand"
	"embed"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"holon.dev/holon"
	"holon.dev/holon/appliance/accounts"
	"holon.dev/holon/appliance/alerts"
	"holon.dev/holon/appliance/auth"
	"holon.dev/holon/appliance/catalog"
	"holon.dev/holon/appliance/files"
	"holon.dev/holon/appliance/front"
	"holon.dev/holon/appliance/github"
	"holon.dev/holon/appliance/idempotency"
	"holon.dev/holon/appliance/ops"
	"holon.dev/holon/appliance/origin"
	"holon.dev/holon/appliance/publishing"
	"holon.dev/holon/appliance/signin"
	"holon.dev/holon/appliance/web"
	"holon.dev/holon/gateway"
	"holon.dev/holon/gateway/contract"
	"holon.dev/holon/gateway/remote"
)

//go:embed demo/*.yaml
var demoMandates embed.FS

// App is a running appliance: store, engine, the rooms wired around them
// (wire.go), their routes behind the front door (routes.go) and the
// background workers (workers.go).
type App struct {
	cfg     Config
	store   holon.Store
	engine  *gateway.Engine
	log     *slog.Logger
	metrics *ops.Metrics
	mcp     *remote.MCPRunner
	webhook *remote.WebhookRunner
	// origin is the one rule of the gateway's names and origin.
	origin *origin.Rule
	// files keeps uploads; idem keeps Idempotency-Keys; vault the
	// endpoint credentials.
	files *files.Store
	idem  *idempotency.Keys
	vault *publishing.Vault
	// listings runs evaluations and serves the catalogue, earnings and
	// the demo; publisher is the one path that lists a published version.
	listings  *catalog.Catalog
	publisher *publishing.Publisher
	// The hosted half (nil on a dev gateway): accounts, rate limits, the
	// admin key's SHA-256 (nil: no operator), GitHub (nil when no GitHub
	// app is configured) and sign-in.
	accounts *accounts.Repo
	limits   *limiters
	adminKey []byte
	github   *github.Client
	signin   *signin.Service
	// router holds every room's routes, behind chain (who sends a
	// request) and door (the front door); served is the door with the
	// metrics in front (/metrics, request counts).
	router *web.Router
	chain  *auth.Chain
	door   *front.Door
	served http.Handler
	// workers are the background loops, under one context (workers.go).
	workers *workers
	// alerts keeps the webhooks and delivers the budget alerts.
	alerts *alerts.Service
	// mcpStateKey seals the MCP request states (wire.go,
	// openMCPStateKey): the same on every gateway of the store.
	mcpStateKey []byte
}

// Open checks the configuration, opens the store, loads the agents and
// mandates, closes the calls a previous run left in flight (and marks
// their Idempotency-Keys interrupted), and returns the appliance ready to
// serve.
func Open(ctx context.Context, cfg Config) (*App, error) {
	if err := cfg.Check(); err != nil {
		return nil, err
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Rand == nil {
		cfg.Rand = rand.Reader
	}
	if cfg.Limits == (Limits{}) {
		cfg.Limits = DefaultLimits
	}
	if cfg.PlatformFX == nil {
		cfg.PlatformFX = DefaultPlatformFX
	}
	if cfg.IdempotencyTTL == 0 {
		cfg.IdempotencyTTL = DefaultIdempotencyTTL
	}
	if cfg.OpenStore == nil {
		return nil, errors.New("appliance: Config.OpenStore is not set (kv.OpenStore opens the embedded store)")
	}
	m := ops.NewMetrics()
	store, err := cfg.OpenStore(cfg.DB, holon.StoreOptions{NoSync: cfg.NoSync, Now: cfg.Now, OnCommit: m.ObserveBatch, OnFailure: cfg.OnStoreFailure})
	if err != nil {
		return nil, err
	}
	app := &App{cfg: cfg, store: store, log: cfg.Logger, metrics: m}
	m.WatchStore(store, app.inMemory)
	if err := app.init(ctx); err != nil {
		store.Close()
		return nil, err
	}
	return app, nil
}

// loadMandates reads every mandate under dir, or the demo mandates.
func loadMandates(dir string) ([]*contract.Mandate, error) {
	var fsys fs.FS = demoMandates
	root := "demo"
	if dir != "" {
		fsys, root = os.DirFS(dir), "."
	}
	var out []*contract.Mandate
	err := fs.WalkDir(fsys, root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		ext := strings.ToLower(filepath.Ext(path))
		if d.IsDir() || (ext != ".yaml" && ext != ".yml" && ext != ".json") {
			return nil
		}
		b, err := fs.ReadFile(fsys, path)
		if err != nil {
			return err
		}
		if kind, _ := contract.DocumentKind(b); kind != contract.KindMandate {
			return nil
		}
		m, err := contract.ParseMandate(b)
		if err != nil {
			return fmt.Errorf("mandate %s: %w", filepath.Join(dir, path), err)
		}
		out = append(out, m)
		return nil
	})
	if err != nil && errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("mandates directory %s: %w", dir, err)
	}
	return out, err
}

// Engine is the appliance's engine.
func (a *App) Engine() *gateway.Engine { return a.engine }

// Handler is the appliance's HTTP API: the dev API, or with Config.Hosted
// the hosted one, behind keys, scoping and rate limits; and MetricsPath
// (open in dev mode, the admin key's when hosted).
func (a *App) Handler() http.Handler { return a.served }

// Routes lists every route the appliance serves (method and path, the
// path in the router's syntax: /v0/agents/:ns/:name), by path: what an
// API description is checked against.
func (a *App) Routes() []web.Route { return a.router.Routes() }

// MetricsHandler serves the appliance's metrics with no authentication,
// for a listener of their own (holon serve --metrics-addr, loopback by
// default).
func (a *App) MetricsHandler() http.Handler { return a.metrics.Handler(a.log) }

// CheckStore proves the store still answers (ops.CheckStore): a read,
// then an empty update through the writer, however long it waits.
func (a *App) CheckStore(ctx context.Context) error { return ops.CheckStore(ctx, a.store) }

// Watchdog pings systemd's watchdog every interval, each time right after
// CheckStore succeeds, until ctx ends (ops.Watchdog).
func (a *App) Watchdog(ctx context.Context, n *ops.Notifier, every time.Duration) {
	ops.Watchdog(ctx, a.store, n, every, a.log)
}

// HoldsOpen counts the calls in flight: reserved, not settled (their
// holds in the store or in the engine's memory).
func (a *App) HoldsOpen() (int, error) {
	return ops.HoldsOpen(a.store, a.inMemory)
}

// inMemory counts the calls whose hold the engine keeps in memory (not in
// the store's holds) until they settle.
func (a *App) inMemory() int {
	if a.engine == nil {
		return 0
	}
	return a.engine.InFlight()
}

// SweepIdempotencyKeys deletes now every Idempotency-Key whose lifetime
// (Config.IdempotencyTTL) has passed, as the gateway does at start and
// every hour, and returns how many it deleted. Keys of calls still
// running are kept.
func (a *App) SweepIdempotencyKeys(ctx context.Context) (int, error) { return a.idem.Sweep(ctx) }

// SweepFiles deletes now every file whose 24 hours have passed (the
// sweeper does so every minute) and returns how many it deleted. Their
// owners' quota is free again.
func (a *App) SweepFiles(ctx context.Context) (int, error) { return a.files.Sweep(ctx) }

// PutPlatformFile stores an evaluation fixture as a platform file and
// returns its handle. Platform files do not expire and count against no
// quota; a run reads one only under gateway.WithEvaluation (the
// evaluation runner's context): an ordinary caller that passes the handle
// gets file_not_found.
func (a *App) PutPlatformFile(ctx context.Context, contentType string, body io.Reader) (string, error) {
	return a.files.PutPlatformFile(ctx, contentType, body)
}

// RegisterVersion lists a version at run time the way publishing does once
// its rules have passed, through the same path (publishing.Publisher.List): the version's
// record is stored (published), it is added to the registry, its
// evaluation is queued and the OnPublished hooks are told. Publishing's own
// checks (namespace, GitHub, endpoint) are not made here.
func (a *App) RegisterVersion(ctx context.Context, m *contract.Manifest) error {
	_, err := a.publisher.List(ctx, m)
	return err
}

// OnPublished registers fn to be called with the reference
// (ns/name@version) of every version published from now on, after it is
// stored and listed (so Engine().Registry().Get(ref) finds it and calls
// reach it). Each call runs in its own goroutine: fn may take its time.
// It is the seam the evaluation runner attaches to; a runner that must
// survive restarts keeps its own record of what it has still to do.
func (a *App) OnPublished(fn func(ref string)) { a.publisher.OnPublished(fn) }

// Evaluate queues a listed version for evaluation on the suites of its
// capabilities and returns once the queue entry is durable; the run itself
// happens in the background. It is the seam publishing calls after a
// version is committed and listed (and what RegisterVersion calls): the
// entry survives a restart, and a run cut short is run again.
func (a *App) Evaluate(ctx context.Context, ref string) error { return a.listings.Evaluate(ctx, ref) }

// WaitEvaluations blocks until no evaluation is queued or running, or ctx
// is done.
func (a *App) WaitEvaluations(ctx context.Context) error {
	waitCtx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	return a.listings.WaitIdle(waitCtx)
}

// Close stops background work and closes the store. Calls still running
// when it is called are closed as gateway_restarted at the next start.
func (a *App) Close() error {
	if a.workers != nil {
		a.workers.stop()
	}
	if a.mcp != nil {
		a.mcp.Close()
	}
	if a.webhook != nil {
		a.webhook.Close()
	}
	return a.store.Close()
}
