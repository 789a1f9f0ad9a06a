package publishing

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/julienschmidt/httprouter"

	"holon.dev/holon"
	"holon.dev/holon/appliance/auth"
	"holon.dev/holon/appliance/web"
	"holon.dev/holon/appliance/wire"
	"holon.dev/holon/gateway"
	"holon.dev/holon/gateway/contract"
	"holon.dev/holon/gateway/remote"
)

// Publishing (gateway.md §7 "Publishing agents"): POST /v0/agents lists a
// version of one of the author's agents at once, when every rule holds;
// DELETE /v0/agents/{ns}/{name}@{version} yanks it. A published version
// is stored in the store's agents bucket (holon.Doc with Published set, and
// Yanked once withdrawn), so backups, restores and the PostgreSQL schema
// carry it like any agent row, and start-up lists it again (Load).
//
// The seam for what runs after a publish (evaluations): OnPublished
// registers a function that is called, in its own goroutine, with the
// exact reference (ns/name@version) of every version once it is committed
// and listed in the registry, so that it is callable through the engine.

// Config is what a Publisher is made with.
type Config struct {
	Store  holon.Store
	Engine *gateway.Engine
	Log    *slog.Logger
	Now    func() time.Time
	// Vault keeps the endpoint credentials.
	Vault *Vault
	// Webhook runs a draft's one call.
	Webhook *remote.WebhookRunner
	// Guard judges an endpoint's addresses.
	Guard remote.NetGuard
	// Sources checks that an open-source agent's repository is its
	// author's (the GitHub room); nil when GitHub sign-in is not
	// configured, which turns publishing off.
	Sources func(ctx context.Context, repository string, link *wire.GitHubLink) error
	// Evaluate queues a listed version's evaluation, durably (the
	// catalogue).
	Evaluate func(ctx context.Context, ref string) error
}

// Publisher lists published versions and serves the publishing
// endpoints.
type Publisher struct {
	cfg   Config
	hooks hooks
}

// New returns a Publisher.
func New(cfg Config) *Publisher {
	return &Publisher{cfg: cfg}
}

// hooks are the functions told of each published version.
type hooks struct {
	mu  sync.Mutex
	fns []func(ref string)
}

// OnPublished registers fn to be called with the reference
// (ns/name@version) of every version published from now on, after it is
// stored and listed. Each call runs in its own goroutine.
func (p *Publisher) OnPublished(fn func(ref string)) {
	p.hooks.mu.Lock()
	defer p.hooks.mu.Unlock()
	p.hooks.fns = append(p.hooks.fns, fn)
}

func (h *hooks) published(ref string) {
	h.mu.Lock()
	fns := append([]func(string){}, h.fns...)
	h.mu.Unlock()
	for _, fn := range fns {
		go fn(ref)
	}
}

// handlers serve the publishing endpoints.
type handlers struct {
	p     *Publisher
	vault *Vault
	log   *slog.Logger
	now   func() time.Time
}

// Mount registers the publishing endpoints (a hosted gateway's alone),
// each for a human key:
//
//	POST   /v0/agents                           publish a version
//	DELETE /v0/agents/{ns}/{name}@{version}     yank it
//	PUT    /v0/agents/{ns}/{name}/credential    set the endpoint token
//	DELETE /v0/agents/{ns}/{name}/credential    remove it
//	GET    /v0/me/credentials                   the caller's credentials
//	POST   /v0/agents/draft                     draft a webhook listing
func (p *Publisher) Mount(m *auth.Mount) {
	h := &handlers{p: p, vault: p.cfg.Vault, log: p.cfg.Log, now: p.cfg.Now}
	m.Handle("POST", "/v0/agents", auth.Human, h.publishAgent)
	m.Handle("DELETE", "/v0/agents/:ns/:name", auth.Human, h.yankAgent)
	m.Handle("PUT", "/v0/agents/:ns/:name/credential", auth.Human, h.putCredential)
	m.Handle("DELETE", "/v0/agents/:ns/:name/credential", auth.Human, h.deleteCredential)
	m.Handle("GET", "/v0/me/credentials", auth.Human, h.listCredentials)
	m.Handle("POST", "/v0/agents/draft", auth.Human, h.draftAgent)
}

// fail answers with the status of the error's code (web.Fail).
func (h *handlers) fail(w http.ResponseWriter, r *http.Request, err error) {
	web.Fail(h.log, w, r, err)
}

// List stores a version as published and lists it: the one path
// of publishing (POST /v0/agents, once its rules hold) and of
// RegisterVersion. The record is committed first (a version number
// already taken, yanked or not, is refused there), then the version joins
// the registry, its evaluation is queued (durably, before this returns),
// and the OnPublished hooks are told. It returns the time of publication.
func (p *Publisher) List(ctx context.Context, m *contract.Manifest) (time.Time, error) {
	doc, err := json.Marshal(m)
	if err != nil {
		return time.Time{}, err
	}
	ref, now := m.Ref(), p.cfg.Now().UTC()
	err = p.cfg.Store.Update(ctx, func(tx holon.Tx) error {
		if err := versionFree(tx, ref); err != nil {
			return err
		}
		return tx.PutAgent(ref, holon.Doc{Doc: doc, Created: now, Published: true})
	})
	if err != nil {
		return time.Time{}, err
	}
	if err := p.cfg.Engine.Registry().Add(&gateway.AgentVersion{Manifest: m, Facts: contract.AgentFacts{Published: true}}); err != nil {
		// Stored but not listed (its upstream was yanked meanwhile): the
		// next start-up lists what it can, and says why it cannot.
		p.cfg.Log.Error("published version not listed", "agent", ref, "err", err)
		return time.Time{}, err
	}
	// Every listed version is evaluated (evals.md). A queue that cannot be
	// written now is written at the next start (the catalogue queues the stale): the
	// version is listed either way.
	if err := p.cfg.Evaluate(ctx, ref); err != nil {
		p.cfg.Log.Error("queue evaluation", "agent", ref, "err", err)
	}
	p.hooks.published(ref)
	return now, nil
}

// publishAnswer is the answer of POST /v0/agents.
type publishAnswer struct {
	Agent       string    `json:"agent"`
	Listed      bool      `json:"listed"`
	Published   time.Time `json:"published"`
	License     string    `json:"license"`
	Proprietary bool      `json:"proprietary"`
	Repository  string    `json:"repository,omitempty"`
	// CredentialSet says whether calls will carry the author's endpoint token.
	CredentialSet bool `json:"credential_set"`
}

// publishAgent is POST /v0/agents: the body is the manifest (JSON).
func (h *handlers) publishAgent(w http.ResponseWriter, r *http.Request, _ httprouter.Params, p *auth.Principal) {
	if h.p.cfg.Sources == nil {
		h.fail(w, r, holon.Errorf(codeGitHubNotConfigured, "publishing needs sign-in with GitHub, which is not configured on this gateway (HOLON_GITHUB_CLIENT_ID and HOLON_GITHUB_CLIENT_SECRET)"))
		return
	}
	b, err := web.ReadBody(r)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	m, err := contract.ParseManifest(b)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	if err := h.p.checkPublish(r.Context(), m, p); err != nil {
		h.fail(w, r, err)
		return
	}
	ref := m.Ref()
	now, err := h.p.List(r.Context(), m)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	h.log.Info("agent published", "agent", ref, "account", p.Account)
	ans := publishAnswer{Agent: ref, Listed: true, Published: now, License: m.License,
		Proprietary: !m.OpenSource(), CredentialSet: h.vault.Has(m.ID)}
	if m.Source != nil {
		ans.Repository = m.Source.Repository
	}
	web.JSON(w, http.StatusCreated, ans)
}

// versionFree refuses a version published before (yanked or not) or
// listed by the registry's other sources.
func versionFree(tx holon.Tx, ref string) error {
	if _, err := tx.Agent(ref); err == nil {
		return holon.Errorf(CodeVersionExists, "%s was published before: versions are immutable and a yank never frees the number; publish a new version", ref)
	} else if !errors.Is(err, holon.ErrNotFound) {
		return err
	}
	return nil
}
