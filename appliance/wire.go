package appliance

import (
	"context"
	"fmt"
	"io"
	"strings"

	"holon.dev/holon"
	"holon.dev/holon/appliance/accounts"
	"holon.dev/holon/appliance/agents"
	"holon.dev/holon/appliance/alerts"
	"holon.dev/holon/appliance/catalog"
	"holon.dev/holon/appliance/files"
	"holon.dev/holon/appliance/github"
	"holon.dev/holon/appliance/idempotency"
	"holon.dev/holon/appliance/oauth"
	"holon.dev/holon/appliance/origin"
	"holon.dev/holon/appliance/publishing"
	"holon.dev/holon/appliance/signin"
	"holon.dev/holon/appliance/token"
	"holon.dev/holon/gateway"
	"holon.dev/holon/gateway/contract"
	"holon.dev/holon/gateway/remote"
)

// init wires the rooms, in the order each needs the others: the
// registry, the files, the key of the MCP request states and the
// endpoint credentials the engine runs with, the engine (closing what
// the last run left in flight), the mandates, the catalogue, the hosted
// half (accounts, rate limits, GitHub, sign-in), publishing, the
// Idempotency-Keys, the routes of every room behind the front door
// (routes.go), and the background workers (workers.go).
func (a *App) init(ctx context.Context) error {
	a.origin = origin.New(a.cfg.PublicURL, a.cfg.trustsProxy())
	reg, dev, authors, shipped, err := a.loadRegistry()
	if err != nil {
		return err
	}
	if err := a.openFiles(); err != nil {
		return err
	}
	if err := a.openMCPStateKey(ctx); err != nil {
		return err
	}
	if a.vault, err = publishing.NewVault([]byte(a.cfg.FileSecret), a.store, a.cfg.Rand, a.log); err != nil {
		return fmt.Errorf("endpoint credentials: %w", err)
	}
	if a.alerts, err = alerts.New(alerts.Config{Store: a.store, Guard: a.guard(), Secret: []byte(a.cfg.FileSecret),
		RootCAs: a.cfg.RemoteRootCAs, Settings: a.cfg.Alerts, Now: a.cfg.Now, Rand: a.cfg.Rand, Log: a.log}); err != nil {
		return err
	}
	a.openEngine(reg, dev)
	if err := a.recover(ctx); err != nil {
		return err
	}
	if err := a.putMandates(ctx); err != nil {
		return err
	}
	if err := a.openCatalog(ctx); err != nil {
		return err
	}
	if a.cfg.Hosted {
		a.openHosted(authors, shipped)
	}
	a.openPublishing()
	a.idem = idempotency.New(a.store, a.cfg.Now, a.cfg.IdempotencyTTL)
	if err := a.idem.Open(ctx); err != nil {
		return fmt.Errorf("open the idempotency keys: %w", err)
	}
	a.mount()
	a.startWorkers(ctx)
	return nil
}

// openCatalog opens the catalogue: the evaluations (their suites'
// fixtures stored as platform files), the listing and the demo.
func (a *App) openCatalog(ctx context.Context) (err error) {
	a.listings, err = catalog.Open(ctx, a.engine, catalog.Options{PrivateEvals: a.cfg.PrivateEvals, PutFixture: a.files.PutFixture,
		Records: a.cfg.Records, SiteURL: a.cfg.SiteURL, TrustProxy: a.cfg.trustsProxy(),
		Production: a.cfg.Production(), Log: a.log, Now: a.cfg.Now})
	return err
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
	rc := remote.Config{Guard: a.guard(),
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
		OnAlerts:       a.alerts.Wake,
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

// openFiles opens the file store beside the database, with the key that
// signs its links.
func (a *App) openFiles() error {
	key := a.cfg.deriveKey("file links")
	if _, shared := a.store.(holon.BlobStore); shared && key == nil {
		var err error
		if key, err = files.SharedLinkKey(context.Background(), a.store, a.cfg.Rand); err != nil {
			return fmt.Errorf("file link key: %w", err)
		}
	}
	if key == nil {
		// Dev: links signed with a key made now die with the process,
		// which is all a link needs (15 minutes).
		key = make([]byte, 32)
		if _, err := io.ReadFull(a.cfg.Rand, key); err != nil {
			return fmt.Errorf("file link key: %w", err)
		}
		if a.cfg.Hosted {
			a.log.Warn("no HOLON_FILE_SECRET: file links are signed with a key made at start, and stop working at a restart")
		}
	}
	fs, err := files.Open(a.store, files.Options{Dir: filesDir(a.cfg), Now: a.cfg.Now, Rand: a.cfg.Rand, Log: a.cfg.Logger,
		NoSync: a.cfg.NoSync, LinkKey: key, PublicURL: a.cfg.PublicURL})
	if err != nil {
		return err
	}
	a.files = fs
	return nil
}

// mcpStateKeyName holds, in the settings bucket, the key that seals the
// MCP request states of a store whose gateways were given no
// HOLON_FILE_SECRET (named as the file links' key is, files.SharedLinkKey).
const mcpStateKeyName = "k/mcp-states"

// openMCPStateKey gives the MCP server the key that seals the request
// states of 2026-07-28's approvals (mcpserver, mcp_revisions.go): one
// every gateway of the store holds, so that a state sealed by one opens
// on any other and after a restart. It is derived from HOLON_FILE_SECRET,
// else made by the first gateway and kept in the store, on every store
// (the embedded one too: a restart must not refuse the states a client
// holds). A gateway that cannot read or keep it does not start.
func (a *App) openMCPStateKey(ctx context.Context) error {
	key := a.cfg.deriveKey("mcp request states")
	if key == nil {
		var err error
		if key, err = holon.StoredKey(ctx, a.store, holon.BucketSettings, mcpStateKeyName, a.cfg.Rand); err != nil {
			return fmt.Errorf("mcp request state key: %w", err)
		}
	}
	a.mcpStateKey = key
	return nil
}

// filesDir is where the bytes of a store's files live.
func filesDir(cfg Config) string {
	if cfg.FilesDir != "" {
		return cfg.FilesDir
	}
	return cfg.DB + ".files"
}

// openHosted makes the hosted half: accounts (keys, mandates,
// moderation), the rate limits, the admin key, the GitHub client when a
// GitHub app is configured, and sign-in.
func (a *App) openHosted(authors map[string]bool, shipped []string) {
	c := a.cfg
	a.limits = newLimiters(c.Limits, c.trustsProxy(), c.Now, a.store)
	a.accounts = accounts.New(accounts.Config{Store: a.store, Engine: a.engine, Now: c.Now, Rand: c.Rand,
		Authors: authors, Shipped: shipped, FX: c.PlatformFX})
	if c.AdminKey != "" {
		a.adminKey = token.Sum(c.AdminKey)
	} else {
		a.log.Warn("no HOLON_ADMIN_KEY: the admin endpoints answer 401")
	}
	if c.GitHubSignIn() {
		a.github = github.New(github.Options{URL: c.GitHubURL, APIURL: c.GitHubAPIURL,
			ClientID: c.GitHubClientID, ClientSecret: c.GitHubClientSecret, HTTP: c.GitHubHTTP, Now: c.Now})
	} else {
		a.log.Info("no HOLON_GITHUB_CLIENT_ID/SECRET: sign-in with GitHub and publishing are off")
	}
	a.signin = signin.New(signin.Config{
		Store: a.store, Accounts: a.accounts, GitHub: a.github, Origin: a.origin, PublicURL: strings.TrimRight(c.PublicURL, "/"),
		Signups: a.limits.signup, TrustProxy: a.limits.trustProxy, AdminKey: a.adminKey,
		Claimed: oauth.DropPendingCodes, Now: c.Now, Rand: c.Rand, Log: a.log,
	})
}

// openPublishing makes the one path that lists a published version
// (POST /v0/agents, RegisterVersion). Publishing checks an open-source
// agent's repository on GitHub: without GitHub sign-in it is off.
func (a *App) openPublishing() {
	cfg := publishing.Config{Store: a.store, Engine: a.engine, Log: a.log, Now: a.cfg.Now,
		Vault: a.vault, Webhook: a.webhook, Guard: a.guard(), Evaluate: a.listings.Evaluate}
	if a.github != nil {
		cfg.Sources = publishing.GitHubSources(a.github)
	}
	a.publisher = publishing.New(cfg)
}

// guard is the network guard of remote endpoints.
func (a *App) guard() remote.NetGuard {
	return remote.NetGuard{AllowPrivate: a.cfg.AllowPrivateEndpoints, Resolver: a.cfg.Resolver}
}
