package appliance

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"holon.dev/holon"
	"holon.dev/holon/appliance/accounts"
	"holon.dev/holon/appliance/agents"
	"holon.dev/holon/appliance/catalog"
	"holon.dev/holon/appliance/github"
	"holon.dev/holon/appliance/idempotency"
	"holon.dev/holon/appliance/ops"
	"holon.dev/holon/appliance/origin"
	"holon.dev/holon/appliance/publishing"
	"holon.dev/holon/appliance/reports"
	"holon.dev/holon/appliance/v0"
	"holon.dev/holon/gateway"
	"holon.dev/holon/gateway/contract"
	"holon.dev/holon/gateway/remote"
)

// init wires the rooms, in the order each needs the others: the
// registry, the files and the endpoint credentials the engine runs with,
// the engine (closing what the last run left in flight), the mandates,
// the catalogue, publishing, the hosted half (accounts, sign-in), the
// Idempotency-Keys, the routes of every room, and the background workers.
func (a *App) init(ctx context.Context) error {
	reg, dev, authors, shipped, err := a.loadRegistry()
	if err != nil {
		return err
	}
	if err := a.openFiles(); err != nil {
		return err
	}
	if a.vault, err = publishing.NewVault([]byte(a.cfg.FileSecret), a.store, a.cfg.Rand, a.log); err != nil {
		return fmt.Errorf("endpoint credentials: %w", err)
	}
	a.openEngine(reg, dev)
	if err := a.recover(ctx); err != nil {
		return err
	}
	if err := a.putMandates(ctx); err != nil {
		return err
	}
	if a.listings, err = catalog.Open(ctx, a.engine, catalog.Options{PrivateEvals: a.cfg.PrivateEvals, PutFixture: a.files.PutFixture,
		Records: a.cfg.Records, SiteURL: a.cfg.SiteURL, TrustProxy: a.cfg.TrustProxy != nil && *a.cfg.TrustProxy,
		Production: a.cfg.Production(), Log: a.log, Now: a.cfg.Now}); err != nil {
		return err
	}
	if a.cfg.Hosted {
		a.openHosted(authors, shipped)
	}
	a.openPublishing()
	a.idem = idempotency.New(a.store, a.cfg.Now, a.cfg.IdempotencyTTL)
	a.mount()
	a.startWorkers(ctx)
	return nil
}

// loadRegistry lists the agents of every registry source, then the
// published versions, then withdraws the yanked ones. authors are the
// namespaces of every agent listed; shipped those of the agents shipped
// with the gateway.
func (a *App) loadRegistry() (reg *gateway.Registry, dev *gateway.DevRuntime, authors map[string]bool, shipped []string, err error) {
	reg = gateway.NewRegistry()
	dev = gateway.NewDevRuntime()
	agents.RegisterWith(dev, a.cfg.Agents)
	exclude := a.cfg.Exclude
	if exclude == nil {
		exclude = agents.DefaultExclude
	}
	for name, h := range a.cfg.DevHandlers {
		dev.Register(name, h)
	}
	authors = map[string]bool{}
	for _, src := range a.cfg.Registry {
		var ms []*contract.Manifest
		isShipped := false
		switch src {
		case agents.SetAgents, agents.SetExamples:
			ms, err = agents.Load(src)
			isShipped = true
		default:
			ms, err = gateway.LoadManifestDir(src)
		}
		if err != nil {
			return nil, nil, nil, nil, fmt.Errorf("registry %s: %w", src, err)
		}
		ms = agents.Without(ms, exclude)
		for _, m := range ms {
			if m.Runtime.Kind == contract.RuntimeDev && !dev.Has(gateway.DevHandlerName(m)) {
				return nil, nil, nil, nil, fmt.Errorf("registry %s: %s is a dev agent with no handler %q compiled into this gateway", src, m.Ref(), gateway.DevHandlerName(m))
			}
		}
		if err := reg.AddAll(ms, contract.AgentFacts{}, isShipped); err != nil {
			return nil, nil, nil, nil, fmt.Errorf("registry %s: %w", src, err)
		}
		for _, m := range ms {
			if !authors[m.NS()] && isShipped {
				shipped = append(shipped, m.NS())
			}
			authors[m.NS()] = true
		}
	}
	if err := publishing.Load(a.store, reg, a.log); err != nil {
		return nil, nil, nil, nil, err
	}
	// Versions the operator yanked stay withdrawn: they are listed first
	// (so that their forks' royalty chains resolve) and removed at once.
	yanked, err := accounts.YankedRefs(a.store)
	if err != nil {
		return nil, nil, nil, nil, fmt.Errorf("read yanked agents: %w", err)
	}
	for _, ref := range yanked {
		reg.Remove(ref)
	}
	return reg, dev, authors, shipped, nil
}

// openEngine makes the engine, with the dev runtime and the remote ones
// (behind the network guard, with the endpoint credentials).
func (a *App) openEngine(reg *gateway.Registry, dev *gateway.DevRuntime) {
	rc := remote.Config{Guard: remote.NetGuard{AllowPrivate: a.cfg.AllowPrivateEndpoints, Resolver: a.cfg.Resolver},
		Credentials: a.vault.Token, Logger: a.log, RootCAs: a.cfg.RemoteRootCAs}
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
		OnCall:         a.metrics.ObserveCall,
		Files:          a.files,
		OnStep:         a.cfg.OnStep,
	})
}

// recover closes the calls a previous run left in flight and marks their
// Idempotency-Keys interrupted.
func (a *App) recover(ctx context.Context) error {
	closed, err := a.engine.Recover(ctx)
	if err != nil {
		return fmt.Errorf("close calls left in flight: %w", err)
	}
	// A store that cannot be read whole (a receipt that does not decode)
	// still serves, as it did before rollups were kept: its reports count
	// the calls settled from now on, and the next start tries again.
	if rebuilt, err := a.engine.RebuildRollups(ctx); err != nil {
		a.log.Error("could not rebuild the spend and earnings rollups from the receipts: reports leave out the calls before this start", "err", err)
	} else if rebuilt {
		a.log.Info("rebuilt the spend and earnings rollups from the receipts")
	}
	a.metrics.ClosedAtOpen(closed)
	if closed > 0 {
		a.log.Warn("closed calls left in flight by the last run", "calls", closed)
	}
	interrupted, err := idempotency.InterruptRunning(ctx, a.store, a.cfg.Now())
	if err != nil {
		return fmt.Errorf("mark interrupted idempotency keys: %w", err)
	}
	if interrupted > 0 {
		a.log.Warn("marked the Idempotency-Keys of interrupted calls", "keys", interrupted)
	}
	return nil
}

// putMandates stores the mandates of Config.MandatesDir, or on a dev
// gateway the demo mandates.
func (a *App) putMandates(ctx context.Context) error {
	if a.cfg.Hosted && a.cfg.MandatesDir == "" {
		// A hosted gateway's mandates come from its accounts; the demo
		// mandates would hand their accounts to whoever signs up first.
		return nil
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
	return nil
}

// openHosted makes the hosted half: accounts, keys, limits, sign-in and
// publishing.
func (a *App) openHosted(authors map[string]bool, shipped []string) {
	a.hosted = newHosted(a.cfg, a.store, a.engine, a.log, a.cfg.Now, a.cfg.Rand, authors, shipped)
	a.initSignIn(a.hosted)
	if a.cfg.AdminKey == "" {
		a.log.Warn("no HOLON_ADMIN_KEY: the admin endpoints answer 401")
	}
	if !a.cfg.GitHubSignIn() {
		a.log.Info("no HOLON_GITHUB_CLIENT_ID/SECRET: sign-in with GitHub and publishing are off")
	}
}

// openPublishing makes the one path that lists a published version
// (POST /v0/agents, RegisterVersion). Publishing checks an open-source
// agent's repository on GitHub: without GitHub sign-in it is off.
func (a *App) openPublishing() {
	cfg := publishing.Config{Store: a.store, Engine: a.engine, Log: a.log, Now: a.cfg.Now,
		Vault: a.vault, Webhook: a.webhook, Guard: a.guard(), Evaluate: a.listings.Evaluate}
	if a.hosted != nil && a.hosted.github != nil {
		cfg.Sources = a.hosted.checkSource
	}
	a.publisher = publishing.New(cfg)
}

// guard is the network guard of remote endpoints.
func (a *App) guard() remote.NetGuard {
	return remote.NetGuard{AllowPrivate: a.cfg.AllowPrivateEndpoints, Resolver: a.cfg.Resolver}
}

// initSignIn gives a hosted gateway what sign-in and OAuth need: the
// public URL, the network guard and, when configured, the GitHub client.
func (a *App) initSignIn(h *hosted) {
	h.publicURL = strings.TrimRight(a.cfg.PublicURL, "/")
	h.guard = a.guard()
	if !a.cfg.GitHubSignIn() {
		return
	}
	h.github = github.New(github.Options{URL: a.cfg.GitHubURL, APIURL: a.cfg.GitHubAPIURL,
		ClientID: a.cfg.GitHubClientID, ClientSecret: a.cfg.GitHubClientSecret, HTTP: a.cfg.GitHubHTTP, Now: a.cfg.Now})
}

// mount builds the API and has every room register its routes on it.
func (a *App) mount() {
	var backup http.Handler
	if a.cfg.Backup != nil {
		backup = a.cfg.Backup(a.store)
	}
	routes := v0.Config{Engine: a.engine, Log: a.log, Idem: a.idem, Backup: backup}
	if a.hosted != nil {
		routes.Mandates = a.hosted.accounts.Mandates
	}
	a.api = newAPI(a.engine, a.log, a.hosted, v0.New(routes), origin.New(a.cfg.PublicURL, a.cfg.TrustProxy != nil && *a.cfg.TrustProxy))
	a.listings.Mount(a.api.mount, a.hosted != nil)
	a.files.Mount(a.api.mount, a.engine)
	reports.Routes{Engine: a.engine, Log: a.log}.Mount(a.api.mount)
	if a.hosted != nil {
		a.publisher.Mount(a.api.mount)
		a.openOAuth().Mount(a.api.mount)
	}
	a.served = a.metrics.Instrument(a.api, ops.Exposure{Hosted: a.cfg.Hosted, AdminKey: a.cfg.AdminKey,
		CheckHost: a.api.checkHost, Log: a.cfg.Logger})
}

// startWorkers starts the background loops, each until Close: the
// expiry of approvals (and of sign-in states), the evaluation queue, the
// files' sweep, the Idempotency-Keys' sweep, and on a shared store the
// recovery of the calls of gateways that died.
func (a *App) startWorkers(ctx context.Context) {
	a.workers = newWorkers(ctx)
	a.listings.QueueStale(a.workers.ctx)
	w, s := a.workers, a.store
	w.lead(s, "expire", tick(time.Hour, a.expire))
	w.lead(s, "evaluations", a.listings.Run)
	w.lead(s, "files-sweep", func(ctx context.Context) { a.files.SweepEvery(ctx, time.Minute) })
	w.lead(s, "idempotency-sweep", func(ctx context.Context) { a.idem.SweepEvery(ctx, a.log) })
	if buckets, ok := s.(holon.SharedLimits); ok {
		w.lead(s, "rate-buckets", tick(time.Minute, func(ctx context.Context) {
			if _, err := buckets.ForgetFullBuckets(ctx); err != nil && ctx.Err() == nil {
				a.log.Error("forget full rate-limit buckets", "err", err)
			}
		}))
	}
	w.run(a.recoverEvery) // on every gateway: each closes only dead gateways' calls
}

// expire expires stale approvals, and the sign-in states that expired.
func (a *App) expire(ctx context.Context) {
	if _, err := a.engine.ExpireApprovals(ctx); err != nil && ctx.Err() == nil {
		a.log.Error("expire approvals", "err", err)
	}
	if a.hosted != nil {
		if _, err := a.api.signin.Purge(a.cfg.Now()); err != nil && ctx.Err() == nil {
			a.log.Error("purge expired sign-in states", "err", err)
		}
	}
}

// workers are the appliance's background loops: one context, cancelled by
// stop, which then waits for every loop to return.
type workers struct {
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// newWorkers returns a group whose context outlives ctx's cancellation
// (the loops end at Close, not when Open's context does).
func newWorkers(ctx context.Context) *workers {
	w := &workers{}
	w.ctx, w.cancel = context.WithCancel(context.WithoutCancel(ctx))
	return w
}

// run runs fn in the group until its context ends.
func (w *workers) run(fn func(ctx context.Context)) {
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		fn(w.ctx)
	}()
}

// lead runs fn in the group as run does; on a store several gateways
// share that elects leaders (holon.Leader), only while this gateway leads
// job, so that the work runs on one gateway at a time and moves to
// another when its gateway dies.
func (w *workers) lead(store holon.Store, job string, fn func(ctx context.Context)) {
	l, ok := store.(holon.Leader)
	if !ok {
		w.run(fn)
		return
	}
	w.run(func(ctx context.Context) { l.Lead(ctx, job, fn) })
}

// tick is a loop that runs fn at once and then every period, until its
// context ends.
func tick(period time.Duration, fn func(ctx context.Context)) func(ctx context.Context) {
	return func(ctx context.Context) {
		t := time.NewTicker(period)
		defer t.Stop()
		for {
			fn(ctx)
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}
}

// stop cancels the group's context and waits for every loop.
func (w *workers) stop() {
	w.cancel()
	w.wg.Wait()
}
