// Package appliance is the product around the engine: configuration, the
// HTTP API, the shipped agents and the demo mandates. It wires the store,
// the registry and the runtimes into a gateway.Engine and serves it.
package appliance

import (
	"context"
	"crypto/rand"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"holon.dev/holon"
	"holon.dev/holon/appliance/alerts"
	"holon.dev/holon/appliance/catalog"
	"holon.dev/holon/appliance/files"
	"holon.dev/holon/appliance/idempotency"
	"holon.dev/holon/appliance/ops"
	"holon.dev/holon/appliance/publishing"
	"holon.dev/holon/appliance/web"
	"holon.dev/holon/gateway"
	"holon.dev/holon/gateway/contract"
	"holon.dev/holon/gateway/remote"
)

//go:embed demo/*.yaml
var demoMandates embed.FS

// App is a running appliance: store, engine and HTTP handler.
type App struct {
	cfg     Config
	store   holon.Store
	engine  *gateway.Engine
	log     *slog.Logger
	api     *api
	metrics *ops.Metrics
	// served is handler with the metrics in front (/metrics, request counts).
	served  http.Handler
	mcp     *remote.MCPRunner
	webhook *remote.WebhookRunner
	// workers are the background loops, under one context (wire.go).
	workers *workers
	// Publishing (the one path that lists a published version) and the
	// endpoint credentials; the hosted half (nil on a dev gateway).
	publisher *publishing.Publisher
	vault     *publishing.Vault
	hosted    *hosted
	// listings runs evaluations and serves the catalogue, earnings and
	// the demo.
	listings *catalog.Catalog
	// files keeps uploads; idem keeps Idempotency-Keys.
	files *files.Store
	idem  *idempotency.Keys
	// alerts keeps the webhooks and delivers the budget alerts.
	alerts *alerts.Service
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
func (a *App) Routes() []web.Route { return a.api.router.Routes() }

// SweepIdempotencyKeys deletes now every Idempotency-Key whose lifetime
// (Config.IdempotencyTTL) has passed, as the gateway does at start and
// every hour, and returns how many it deleted. Keys of calls still
// running are kept.
func (a *App) SweepIdempotencyKeys(ctx context.Context) (int, error) { return a.idem.Sweep(ctx) }

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
