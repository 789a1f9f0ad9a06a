// Package appliance is the product around the engine: configuration, the
// HTTP API, the shipped agents and the demo mandates. It wires the store,
// the registry and the runtimes into a gateway.Engine and serves it.
package appliance

import (
	"context"
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

	"holon.dev/holon/appliance/agents"
	"holon.dev/holon/gateway"
	"holon.dev/holon/journal"
	"holon.dev/holon/kv"
)

//go:embed demo/*.yaml
var demoMandates embed.FS

// Config is everything the appliance needs, passed down explicitly.
type Config struct {
	// DB is the path of the bbolt file.
	DB string
	// Registry lists where agents come from: "agents" (the shipped ones),
	// "examples" (the demo agents), or directories of holon.yaml files.
	Registry []string
	// MandatesDir holds mandate YAML files; empty loads the demo mandates.
	MandatesDir string
	// SignupCredit is the demo credit each issuer gets once.
	SignupCredit journal.Amount
	// Logger gets internal errors and lifecycle messages.
	Logger *slog.Logger
	// Now is the clock (time.Now when nil).
	Now func() time.Time
	// NoSync turns off fsync: for tests only.
	NoSync bool
	// OnStoreFailure is called when the store fails a write that must not
	// fail; the process should stop.
	OnStoreFailure func(error)
}

// ConfigFromEnv fills the environment's settings into a Config:
// HOLON_REGISTRY (comma list, default "agents") and HOLON_SIGNUP_CREDIT
// (default 5.00).
func ConfigFromEnv(getenv func(string) string, cfg *Config) error {
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
			return fmt.Errorf("HOLON_SIGNUP_CREDIT: %w", err)
		}
		cfg.SignupCredit = a
	}
	return nil
}

// App is a running appliance: store, engine and HTTP handler.
type App struct {
	cfg    Config
	store  *kv.Store
	engine *gateway.Engine
	log    *slog.Logger
	stop   context.CancelFunc
	done   chan struct{}
}

// Open opens the store, loads the agents and mandates, closes the calls a
// previous run left in flight, and returns the appliance ready to serve.
func Open(ctx context.Context, cfg Config) (*App, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	store, err := kv.Open(cfg.DB, kv.Options{NoSync: cfg.NoSync, Now: cfg.Now})
	if err != nil {
		return nil, err
	}
	app := &App{cfg: cfg, store: store, log: cfg.Logger}
	if err := app.init(ctx); err != nil {
		store.Close()
		return nil, err
	}
	return app, nil
}

func (a *App) init(ctx context.Context) error {
	reg := gateway.NewRegistry()
	dev := gateway.NewDevRuntime()
	agents.Register(dev)
	for _, src := range a.cfg.Registry {
		var ms []*gateway.Manifest
		var err error
		shipped := false
		switch src {
		case agents.SetAgents, agents.SetExamples:
			ms, err = agents.Load(src)
			shipped = true
		default:
			ms, err = gateway.LoadManifestDir(src)
		}
		if err != nil {
			return fmt.Errorf("registry %s: %w", src, err)
		}
		for _, m := range ms {
			if m.Runtime.Kind == gateway.RuntimeDev && !dev.Has(gateway.DevHandlerName(m)) {
				return fmt.Errorf("registry %s: %s is a dev agent with no handler %q compiled into this gateway", src, m.Ref(), gateway.DevHandlerName(m))
			}
		}
		if err := reg.AddAll(ms, gateway.AgentFacts{}, shipped); err != nil {
			return fmt.Errorf("registry %s: %w", src, err)
		}
	}
	a.engine = gateway.New(gateway.Config{
		Store:          a.store,
		Registry:       reg,
		Runners:        map[string]gateway.Runner{gateway.RuntimeDev: dev},
		Now:            a.cfg.Now,
		SignupCredit:   a.cfg.SignupCredit,
		Logger:         a.log,
		OnStoreFailure: a.cfg.OnStoreFailure,
	})
	closed, err := a.engine.Recover(ctx)
	if err != nil {
		return fmt.Errorf("close calls left in flight: %w", err)
	}
	if closed > 0 {
		a.log.Warn("closed calls left in flight by the last run", "calls", closed)
	}
	mandates, err := loadMandates(a.cfg.MandatesDir)
	if err != nil {
		return err
	}
	for _, m := range mandates {
		if err := a.engine.PutMandate(ctx, m); err != nil {
			return fmt.Errorf("mandate %s: %w", m.ID, err)
		}
	}
	sweepCtx, stop := context.WithCancel(context.WithoutCancel(ctx))
	a.stop, a.done = stop, make(chan struct{})
	go a.sweep(sweepCtx)
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
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// loadMandates reads every mandate under dir, or the demo mandates.
func loadMandates(dir string) ([]*gateway.Mandate, error) {
	var fsys fs.FS = demoMandates
	root := "demo"
	if dir != "" {
		fsys, root = os.DirFS(dir), "."
	}
	var out []*gateway.Mandate
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
		if kind, _ := gateway.DocumentKind(b); kind != gateway.KindMandate {
			return nil
		}
		m, err := gateway.ParseMandate(b)
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

// Handler is the appliance's HTTP API.
func (a *App) Handler() http.Handler { return newAPI(a.engine, a.log).routes() }

// Close stops background work and closes the store. Calls still running
// when it is called are closed as gateway_restarted at the next start.
func (a *App) Close() error {
	if a.stop != nil {
		a.stop()
		<-a.done
	}
	return a.store.Close()
}
