package appliance

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/julienschmidt/httprouter"

	"holon.dev/holon"
	"holon.dev/holon/appliance/accounts"
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
// carry it like any agent row, and start-up lists it again.
//
// The seam for what runs after a publish (evaluations): App.OnPublished
// registers a function that is called, in its own goroutine, with the
// exact reference (ns/name@version) of every version once it is committed
// and listed in the registry, so that it is callable through the engine.

// Error codes of publishing (their HTTP statuses are in web.Status).
const (
	CodeNotYourNamespace    = "not_your_namespace"
	CodeGitHubNotLinked     = "github_not_linked"
	CodeRuntimeNotPublished = "runtime_not_published"
	CodeEndpointNotHTTPS    = "endpoint_not_https"
	CodeEndpointNotPublic   = "endpoint_not_public"
	CodeEndpointUnresolved  = "endpoint_unresolvable"
	CodeRepositoryNotFound  = "repository_not_found"
	CodeRepositoryNotYours  = "repository_not_yours"
	CodeNotPublicMember     = "not_public_member"
	CodeVersionExists       = "version_exists"
	CodeInvalidToken        = "invalid_token"
	CodeCredentialsOff      = "credentials_unavailable"
	CodeDraftCallFailed     = "draft_call_failed"
)

// publishHooks are the functions told of each published version.
type publishHooks struct {
	mu  sync.Mutex
	fns []func(ref string)
}

func (p *publishHooks) add(fn func(ref string)) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.fns = append(p.fns, fn)
}

func (p *publishHooks) published(ref string) {
	p.mu.Lock()
	fns := append([]func(string){}, p.fns...)
	p.mu.Unlock()
	for _, fn := range fns {
		go fn(ref)
	}
}

// OnPublished registers fn to be called with the reference
// (ns/name@version) of every version published from now on, after it is
// stored and listed (so Engine().Registry().Get(ref) finds it and calls
// reach it). Each call runs in its own goroutine: fn may take its time.
// It is the seam the evaluation runner attaches to; a runner that must
// survive restarts keeps its own record of what it has still to do.
func (a *App) OnPublished(fn func(ref string)) { a.hooks.add(fn) }

// initPublishing gives a hosted gateway what sign-in and publishing need.
func (a *App) initPublishing(h *hosted) {
	h.publicURL = strings.TrimRight(a.cfg.PublicURL, "/")
	h.hooks, h.vault, h.webhook = a.hooks, a.vault, a.webhook
	h.list = a.listVersion
	h.guard = remote.NetGuard{AllowPrivate: a.cfg.AllowPrivateEndpoints, Resolver: a.cfg.Resolver}
	if !a.cfg.GitHubSignIn() {
		return
	}
	web, api := a.cfg.GitHubURL, a.cfg.GitHubAPIURL
	if web == "" {
		web = DefaultGitHubURL
	}
	if api == "" {
		api = DefaultGitHubAPIURL
	}
	client := a.cfg.GitHubHTTP
	if client == nil {
		client = &http.Client{Timeout: 10 * time.Second}
	}
	h.github = &githubClient{web: strings.TrimRight(web, "/"), api: strings.TrimRight(api, "/"),
		clientID: a.cfg.GitHubClientID, clientSecret: a.cfg.GitHubClientSecret, http: client, now: a.cfg.Now}
}

// loadPublished lists the published versions the store holds, upstreams
// before their forks, then withdraws the yanked ones (listed first so that
// their forks' royalty chains resolve). A version that no longer loads is
// logged and left out: it must not stop the gateway.
func (a *App) loadPublished(reg *gateway.Registry) error {
	type stored struct {
		ref    string
		doc    []byte
		yanked bool
	}
	var docs []stored
	err := a.store.View(func(tx holon.Tx) error {
		return tx.ForEachAgent(func(ref string, d holon.Doc) error {
			if d.Published {
				docs = append(docs, stored{ref: ref, doc: bytes.Clone(d.Doc), yanked: d.Yanked != ""})
			}
			return nil
		})
	})
	if err != nil {
		return fmt.Errorf("read published agents: %w", err)
	}
	// Compiling the schemas is most of the work (about half a millisecond a
	// version): spread it over the cores.
	parsed := make([]*contract.Manifest, len(docs))
	var wg sync.WaitGroup
	next := make(chan int)
	for w := 0; w < runtime.GOMAXPROCS(0); w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				m, err := contract.ParseManifest(docs[i].doc)
				if err != nil {
					a.log.Error("published version does not load: left out", "agent", docs[i].ref, "err", err)
					continue
				}
				parsed[i] = m
			}
		}()
	}
	for i := range docs {
		next <- i
	}
	close(next)
	wg.Wait()
	var ms []*contract.Manifest
	var yanked []string
	for i, m := range parsed {
		if m == nil {
			continue
		}
		ms = append(ms, m)
		if docs[i].yanked {
			yanked = append(yanked, docs[i].ref)
		}
	}
	for len(ms) > 0 {
		var next []*contract.Manifest
		var lastErr error
		for _, m := range ms {
			if err := reg.Add(&gateway.AgentVersion{Manifest: m, Facts: contract.AgentFacts{Published: true}}); err != nil {
				next, lastErr = append(next, m), err
			}
		}
		if len(next) == len(ms) {
			for _, m := range next {
				a.log.Error("published version cannot be listed: left out", "agent", m.Ref(), "err", lastErr)
			}
			break
		}
		ms = next
	}
	for _, ref := range yanked {
		reg.Remove(ref)
	}
	return nil
}

func (a *api) publishRoutes() {
	a.signinRoutes()
	a.handle("POST", "/v0/agents", auth.Human, a.publishAgent)
	a.handle("DELETE", "/v0/agents/:ns/:name", auth.Human, a.yankAgent)
	a.handle("PUT", "/v0/agents/:ns/:name/credential", auth.Human, a.putCredential)
	a.handle("DELETE", "/v0/agents/:ns/:name/credential", auth.Human, a.deleteCredential)
	a.handle("GET", "/v0/me/credentials", auth.Human, a.listCredentials)
	a.handle("POST", "/v0/agents/draft", auth.Human, a.draftAgent)
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
func (a *api) publishAgent(w http.ResponseWriter, r *http.Request, _ httprouter.Params, p *auth.Principal) {
	h := a.hosted
	if h.github == nil {
		a.fail(w, r, holon.Errorf(CodeGitHubNotConfigured, "publishing needs sign-in with GitHub, which is not configured on this gateway (HOLON_GITHUB_CLIENT_ID and HOLON_GITHUB_CLIENT_SECRET)"))
		return
	}
	b, err := web.ReadBody(r)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	m, err := contract.ParseManifest(b)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	if err := a.checkPublish(r.Context(), m, p); err != nil {
		a.fail(w, r, err)
		return
	}
	ref := m.Ref()
	now, err := h.list(r.Context(), m)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	a.log.Info("agent published", "agent", ref, "account", p.Account)
	ans := publishAnswer{Agent: ref, Listed: true, Published: now, License: m.License,
		Proprietary: !m.OpenSource(), CredentialSet: h.vault.has(m.ID)}
	if m.Source != nil {
		ans.Repository = m.Source.Repository
	}
	web.JSON(w, http.StatusCreated, ans)
}

// listVersion stores a version as published and lists it: the one path
// of publishing (POST /v0/agents, once its rules hold) and of
// RegisterVersion. The record is committed first (a version number
// already taken, yanked or not, is refused there), then the version joins
// the registry, its evaluation is queued (durably, before this returns),
// and the OnPublished hooks are told. It returns the time of publication.
func (a *App) listVersion(ctx context.Context, m *contract.Manifest) (time.Time, error) {
	doc, err := json.Marshal(m)
	if err != nil {
		return time.Time{}, err
	}
	ref, now := m.Ref(), a.cfg.Now().UTC()
	err = a.store.Update(ctx, func(tx holon.Tx) error {
		if err := versionFree(tx, ref); err != nil {
			return err
		}
		return tx.PutAgent(ref, holon.Doc{Doc: doc, Created: now, Published: true})
	})
	if err != nil {
		return time.Time{}, err
	}
	if err := a.engine.Registry().Add(&gateway.AgentVersion{Manifest: m, Facts: contract.AgentFacts{Published: true}}); err != nil {
		// Stored but not listed (its upstream was yanked meanwhile): the
		// next start-up lists what it can, and says why it cannot.
		a.log.Error("published version not listed", "agent", ref, "err", err)
		return time.Time{}, err
	}
	// Every listed version is evaluated (evals.md). A queue that cannot be
	// written now is written at the next start (enqueueStale): the
	// version is listed either way.
	if err := a.Evaluate(ctx, ref); err != nil {
		a.log.Error("queue evaluation", "agent", ref, "err", err)
	}
	a.hooks.published(ref)
	return now, nil
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

// checkPublish applies the rules of "Publishing agents" that need more
// than the manifest itself.
func (a *api) checkPublish(ctx context.Context, m *contract.Manifest, p *auth.Principal) error {
	h := a.hosted
	if m.NS() != p.Account {
		return holon.Errorf(CodeNotYourNamespace, "id %s is outside your namespace: publish it as %s/%s", m.ID, p.Account, m.Name())
	}
	var acct *accounts.Account
	if err := h.store.View(func(tx holon.Tx) error { var err error; acct, err = accounts.Get(tx, p.Account); return err }); err != nil {
		return err
	}
	if acct.GitHub == nil {
		return holon.Errorf(CodeGitHubNotLinked, "publishing needs an account linked to GitHub: sign in with GitHub (GET /v0/auth/github) with a GitHub account whose verified primary email is %s, which links it", acct.Email)
	}
	if k := m.Runtime.Kind; k != contract.RuntimeMCP && k != contract.RuntimeWebhook {
		return holon.Errorf(CodeRuntimeNotPublished, "runtime.kind %s cannot be published: published agents run on their author's server, as mcp or webhook", k)
	}
	if err := a.checkEndpoint(ctx, m.Runtime.Endpoint); err != nil {
		return err
	}
	ref := m.Ref()
	if _, ok := a.engine.Registry().Get(ref); ok {
		return holon.Errorf(CodeVersionExists, "%s is listed already: versions are immutable; publish a new version", ref)
	}
	if err := h.store.View(func(tx holon.Tx) error { return versionFree(tx, ref) }); err != nil {
		return err
	}
	if _, err := m.CheckLineage(func(ref string) (*contract.Manifest, bool) {
		v, ok := a.engine.Registry().Get(ref)
		if !ok {
			return nil, false
		}
		return v.Manifest, true
	}); err != nil {
		return err
	}
	if m.OpenSource() {
		return h.checkSource(ctx, m.Source.Repository, acct.GitHub)
	}
	return nil
}

// checkEndpoint wants https, no credentials, and only public addresses
// (unless HOLON_ALLOW_PRIVATE_ENDPOINTS=1). The guarded client checks the
// address again at every connection.
func (a *api) checkEndpoint(ctx context.Context, endpoint string) error {
	u, err := url.Parse(endpoint)
	if err != nil {
		return holon.Errorf(CodeEndpointNotHTTPS, "runtime.endpoint %q is not a URL", endpoint)
	}
	if u.Scheme != "https" {
		return holon.Errorf(CodeEndpointNotHTTPS, "runtime.endpoint must be https (got %s://): published agents are reached over TLS only", u.Scheme)
	}
	if u.User != nil {
		return holon.Errorf(holon.CodeInvalidManifest, "runtime.endpoint must not carry credentials: set them with PUT /v0/agents/{ns}/{name}/credential")
	}
	g := a.hosted.guard
	if g.AllowPrivate {
		return nil
	}
	var blocked *remote.BlockedAddressError
	switch err := g.CheckHost(ctx, u.Hostname()); {
	case errors.As(err, &blocked):
		return holon.Errorf(CodeEndpointNotPublic, "runtime.endpoint %s resolves to %s, a %s address: published agents must resolve only to public addresses", u.Host, blocked.Addr, blocked.Why)
	case err != nil:
		return holon.Errorf(CodeEndpointUnresolved, "runtime.endpoint %s does not resolve: %v", u.Host, err)
	}
	return nil
}

// checkSource wants source.repository to be a public GitHub repository of
// the author's GitHub account, or of an organisation that lists that
// account as a public member.
func (h *hosted) checkSource(ctx context.Context, repository string, link *wire.GitHubLink) error {
	path := strings.TrimSuffix(strings.TrimPrefix(repository, "https://github.com/"), ".git")
	owner, name, _ := strings.Cut(strings.TrimSuffix(path, "/"), "/")
	rp, err := h.github.repo(ctx, owner, name)
	var ge *githubError
	switch {
	case errors.Is(err, errGitHubNotFound):
		return holon.Errorf(CodeRepositoryNotFound, "source.repository %s is private or does not exist: an open-source agent names its public GitHub repository (or publish it as proprietary)", repository)
	case errors.As(err, &ge) && ge.unavailable:
		return githubUnavailable(ge)
	case err != nil:
		return holon.Errorf(CodeGitHubUnavailable, "checking source.repository on GitHub failed: %v; try again", err)
	case rp.Private:
		return holon.Errorf(CodeRepositoryNotFound, "source.repository %s is private: an open-source agent names a public repository", repository)
	}
	switch rp.Owner.Type {
	case "User":
		if rp.Owner.ID != link.ID {
			return holon.Errorf(CodeRepositoryNotYours, "source.repository %s belongs to GitHub user %s, and you signed in as %s: only the author of the code can list it", repository, rp.Owner.Login, link.Login)
		}
		return nil
	case "Organization":
		ok, err := h.github.publicMember(ctx, rp.Owner.Login, link.Login)
		if errors.As(err, &ge) && ge.unavailable {
			return githubUnavailable(ge)
		} else if err != nil {
			return holon.Errorf(CodeGitHubUnavailable, "checking %s's members on GitHub failed: %v; try again", rp.Owner.Login, err)
		}
		if !ok {
			return holon.Errorf(CodeNotPublicMember, "source.repository %s belongs to the organisation %s, which does not list %s as a public member: make your membership public on GitHub, then publish again", repository, rp.Owner.Login, link.Login)
		}
		return nil
	}
	return holon.Errorf(CodeRepositoryNotYours, "source.repository %s belongs to %s, a GitHub %s: only users and organisations can list agents", repository, rp.Owner.Login, rp.Owner.Type)
}

// githubUnavailable is the 503 of a GitHub outage or rate limit.
func githubUnavailable(ge *githubError) error {
	msg := "GitHub cannot answer now (" + ge.message + "): try again"
	if ge.retryAfter > 0 {
		msg += " in " + strconv.Itoa(int(ge.retryAfter.Seconds())+1) + " s"
	}
	return holon.Errorf(CodeGitHubUnavailable, "%s", msg)
}

// yankAgent is DELETE /v0/agents/{ns}/{name}@{version}: the version stops
// being listed and resolved; its number stays taken.
func (a *api) yankAgent(w http.ResponseWriter, r *http.Request, ps httprouter.Params, p *auth.Principal) {
	h := a.hosted
	ns, nameVersion := ps.ByName("ns"), ps.ByName("name")
	ref := ns + "/" + nameVersion
	if !strings.Contains(nameVersion, "@") {
		a.fail(w, r, holon.Errorf(holon.CodeInvalidRequest, "name the exact version to yank: DELETE /v0/agents/%s@<version>", ref))
		return
	}
	if ns != p.Account {
		a.fail(w, r, web.NotFound("you published no version %s", ref))
		return
	}
	now := h.now().UTC()
	err := h.store.Update(r.Context(), func(tx holon.Tx) error {
		d, err := tx.Agent(ref)
		if errors.Is(err, holon.ErrNotFound) || err == nil && !d.Published {
			return web.NotFound("you published no version %s", ref)
		} else if err != nil {
			return err
		}
		if d.Yanked != "" {
			return holon.Errorf(CodeAlreadyYanked, "%s was yanked already, at %s", ref, d.Yanked)
		} else if yr, err := accounts.Yanked(tx, ref); err == nil {
			return holon.Errorf(CodeAlreadyYanked, "%s was withdrawn by the operator, at %s", ref, yr.Time.Format(time.RFC3339))
		}
		d.Yanked = now.Format(time.RFC3339)
		return tx.PutAgent(ref, d)
	})
	if err != nil {
		a.fail(w, r, err)
		return
	}
	a.engine.Registry().Remove(ref)
	a.log.Info("agent yanked", "agent", ref, "account", p.Account)
	web.JSON(w, http.StatusOK, map[string]any{"agent": ref, "yanked": now,
		"note": "the version is no longer listed; its number stays taken"})
}
