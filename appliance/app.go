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
	"holon.dev/holon/appliance/agents"
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
	handler http.Handler
	metrics *metrics
	// served is handler with the metrics in front (/metrics, request counts).
	served  http.Handler
	mcp     *remote.MCPRunner
	webhook *remote.WebhookRunner
	stop    context.CancelFunc
	done    chan struct{}
	// Publishing: the hooks told of each published version, the endpoint
	// credentials, and the hosted half (nil on a dev gateway).
	hooks  *publishHooks
	vault  *vault
	hosted *hosted
	// evals runs evaluations; listings serves the catalogue, earnings and
	// the demo (listings.go).
	evals     *evaluator
	listings  *listings
	evalsDone <-chan struct{}
	// files keeps uploads (files.go); filesDone closes when its sweeper ends.
	files     *fileStore
	filesDone chan struct{}
	// idem keeps Idempotency-Keys (idempotency.go); idemDone closes when
	// its sweeper ends.
	idem     *idempotency
	idemDone chan struct{}
	// recoverDone closes when the recovery of dead gateways' calls
	// stops (recover.go).
	recoverDone chan struct{}
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
	m := newMetrics()
	store, err := cfg.OpenStore(cfg.DB, holon.StoreOptions{NoSync: cfg.NoSync, Now: cfg.Now, OnCommit: m.observeBatch, OnFailure: cfg.OnStoreFailure})
	if err != nil {
		return nil, err
	}
	app := &App{cfg: cfg, store: store, log: cfg.Logger, metrics: m, hooks: &publishHooks{}}
	m.watchStore(store, app.inMemory)
	if err := app.init(ctx); err != nil {
		store.Close()
		return nil, err
	}
	return app, nil
}

func (a *App) init(ctx context.Context) error {
	reg := gateway.NewRegistry()
	dev := gateway.NewDevRuntime()
	agents.RegisterWith(dev, a.cfg.Agents)
	exclude := a.cfg.Exclude
	if exclude == nil {
		exclude = agents.DefaultExclude
	}
	for name, h := range a.cfg.DevHandlers {
		dev.Register(name, h)
	}
	authors := map[string]bool{}
	var shipped []string
	for _, src := range a.cfg.Registry {
		var ms []*contract.Manifest
		var err error
		isShipped := false
		switch src {
		case agents.SetAgents, agents.SetExamples:
			ms, err = agents.Load(src)
			isShipped = true
		default:
			ms, err = gateway.LoadManifestDir(src)
		}
		if err != nil {
			return fmt.Errorf("registry %s: %w", src, err)
		}
		ms = agents.Without(ms, exclude)
		for _, m := range ms {
			if m.Runtime.Kind == contract.RuntimeDev && !dev.Has(gateway.DevHandlerName(m)) {
				return fmt.Errorf("registry %s: %s is a dev agent with no handler %q compiled into this gateway", src, m.Ref(), gateway.DevHandlerName(m))
			}
		}
		if err := reg.AddAll(ms, contract.AgentFacts{}, isShipped); err != nil {
			return fmt.Errorf("registry %s: %w", src, err)
		}
		for _, m := range ms {
			if !authors[m.NS()] && isShipped {
				shipped = append(shipped, m.NS())
			}
			authors[m.NS()] = true
		}
	}
	if err := a.loadPublished(reg); err != nil {
		return err
	}
	// Versions the operator yanked stay withdrawn: they are listed first
	// (so that their forks' royalty chains resolve) and removed at once.
	yanked, err := yankedRefs(a.store)
	if err != nil {
		return fmt.Errorf("read yanked agents: %w", err)
	}
	for _, ref := range yanked {
		reg.Remove(ref)
	}
	if err := a.openFiles(); err != nil {
		return err
	}
	if a.vault, err = newVault([]byte(a.cfg.FileSecret), a.store, a.cfg.Rand, a.log); err != nil {
		return fmt.Errorf("endpoint credentials: %w", err)
	}
	rc := remote.Config{Guard: remote.NetGuard{AllowPrivate: a.cfg.AllowPrivateEndpoints, Resolver: a.cfg.Resolver},
		Credentials: a.vault.token, Logger: a.log, RootCAs: a.cfg.RemoteRootCAs}
	a.mcp, a.webhook = remote.NewMCPRunner(rc), remote.NewWebhookRunner(rc)
	a.engine = gateway.New(gateway.Config{
		Store:    a.store,
		Registry: reg,
		Runners: map[string]gateway.Runner{
			contract.RuntimeDev:     dev,
			contract.RuntimeMCP:     a.mcp,
			contract.RuntimeWebhook: a.webhook,
		},
		PublicURL:      a.cfg.PublicURL,
		Now:            a.cfg.Now,
		SignupCredit:   a.cfg.SignupCredit,
		Logger:         a.log,
		OnStoreFailure: a.cfg.OnStoreFailure,
		OnCall:         a.metrics.observeCall,
		Files:          a.files,
		OnStep:         a.cfg.OnStep,
	})
	closed, err := a.engine.Recover(ctx)
	if err != nil {
		return fmt.Errorf("close calls left in flight: %w", err)
	}
	a.metrics.closedAtOpen.Set(float64(closed))
	if closed > 0 {
		a.log.Warn("closed calls left in flight by the last run", "calls", closed)
	}
	interrupted, err := interruptRunning(ctx, a.store, a.cfg.Now())
	if err != nil {
		return fmt.Errorf("mark interrupted idempotency keys: %w", err)
	}
	if interrupted > 0 {
		a.log.Warn("marked the Idempotency-Keys of interrupted calls", "keys", interrupted)
	}
	var mandates []*contract.Mandate
	if !a.cfg.Hosted || a.cfg.MandatesDir != "" {
		// A hosted gateway's mandates come from its accounts; the demo
		// mandates would hand their accounts to whoever signs up first.
		if mandates, err = loadMandates(a.cfg.MandatesDir); err != nil {
			return err
		}
	}
	for _, m := range mandates {
		if err := a.engine.PutMandate(ctx, m); err != nil {
			return fmt.Errorf("mandate %s: %w", m.ID, err)
		}
	}
	var h *hosted
	if a.cfg.Hosted {
		h = newHosted(a.cfg, a.store, a.engine, a.log, a.cfg.Now, a.cfg.Rand, authors, shipped)
		a.initPublishing(h)
		a.hosted = h
		if a.cfg.AdminKey == "" {
			a.log.Warn("no HOLON_ADMIN_KEY: the admin endpoints answer 401")
		}
		if !a.cfg.GitHubSignIn() {
			a.log.Info("no HOLON_GITHUB_CLIENT_ID/SECRET: sign-in with GitHub and publishing are off")
		}
	}
	if err := a.initListings(); err != nil {
		return err
	}
	var backup http.Handler
	if a.cfg.Backup != nil {
		backup = a.cfg.Backup(a.store)
	}
	a.idem = &idempotency{store: a.store, now: a.cfg.Now, ttl: a.cfg.IdempotencyTTL}
	api := newAPI(a.engine, a.log, h, a.idem, backup)
	api.publicURL = strings.TrimRight(a.cfg.PublicURL, "/")
	api.routeListings(a.listings)
	api.routeFiles(a.files)
	a.handler = api
	a.served = a.metrics.instrument(a.handler, a.cfg)
	sweepCtx, stop := context.WithCancel(context.WithoutCancel(ctx))
	a.stop, a.done = stop, make(chan struct{})
	go a.sweep(sweepCtx)
	a.evalsDone = a.startListings(sweepCtx)
	a.filesDone = make(chan struct{})
	go a.sweepFilesEvery(sweepCtx, time.Minute)
	a.idemDone = make(chan struct{})
	go a.sweepIdempotencyEvery(sweepCtx, idemSweepEvery(a.cfg.IdempotencyTTL))
	a.recoverDone = make(chan struct{})
	go a.recoverEvery(sweepCtx)
	return nil
}

// sweep expires stale approvals every hour.
func (a *App) sweep(ctx context.Context) {
	defer close(a.done)
	t := time.NewTicker(time.Hour)
	defer t.Stop()
	for {
		if _, err := a.engine.ExpireApprovals(ctx); err != nil && ctx.Err() == nil {
			a.log.Error("expire approvals", "err", err)
		}
		if a.hosted != nil {
			if _, err := a.hosted.purgeSignIn(a.cfg.Now()); err != nil && ctx.Err() == nil {
				a.log.Error("purge expired sign-in states", "err", err)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
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

// Close stops background work and closes the store. Calls still running
// when it is called are closed as gateway_restarted at the next start.
func (a *App) Close() error {
	if a.stop != nil {
		a.stop()
		<-a.done
		<-a.evalsDone
		<-a.filesDone
		<-a.idemDone
		<-a.recoverDone
	}
	if a.mcp != nil {
		a.mcp.Close()
	}
	if a.webhook != nil {
		a.webhook.Close()
	}
	return a.store.Close()
}
