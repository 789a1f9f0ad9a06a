package publishing

import (
	"context"
	"errors"
	"net/url"

	"holon.dev/holon"
	"holon.dev/holon/appliance/accounts"
	"holon.dev/holon/appliance/auth"
	"holon.dev/holon/gateway/contract"
	"holon.dev/holon/gateway/remote"
)

// checkPublish applies the rules of "Publishing agents" that need more
// than the manifest itself.
func (pb *Publisher) checkPublish(ctx context.Context, m *contract.Manifest, p *auth.Principal) error {
	if m.NS() != p.Account {
		return holon.Errorf(CodeNotYourNamespace, "id %s is outside your namespace: publish it as %s/%s", m.ID, p.Account, m.Name())
	}
	var acct *accounts.Account
	if err := pb.cfg.Store.View(func(tx holon.Tx) error { var err error; acct, err = accounts.Get(tx, p.Account); return err }); err != nil {
		return err
	}
	if acct.GitHub == nil {
		return holon.Errorf(CodeGitHubNotLinked, "publishing needs an account linked to GitHub: sign in with GitHub (GET /v0/auth/github) with a GitHub account whose verified primary email is %s, which links it", acct.Email)
	}
	if k := m.Runtime.Kind; k != contract.RuntimeMCP && k != contract.RuntimeWebhook {
		return holon.Errorf(CodeRuntimeNotPublished, "runtime.kind %s cannot be published: published agents run on their author's server, as mcp or webhook", k)
	}
	if err := pb.CheckEndpoint(ctx, m.Runtime.Endpoint); err != nil {
		return err
	}
	ref := m.Ref()
	if _, ok := pb.cfg.Engine.Registry().Get(ref); ok {
		return holon.Errorf(CodeVersionExists, "%s is listed already: versions are immutable; publish a new version", ref)
	}
	if err := pb.cfg.Store.View(func(tx holon.Tx) error { return versionFree(tx, ref) }); err != nil {
		return err
	}
	if _, err := m.CheckLineage(func(ref string) (*contract.Manifest, bool) {
		v, ok := pb.cfg.Engine.Registry().Get(ref)
		if !ok {
			return nil, false
		}
		return v.Manifest, true
	}); err != nil {
		return err
	}
	if m.OpenSource() {
		return pb.cfg.Sources(ctx, m.Source.Repository, acct.GitHub)
	}
	return nil
}

// CheckEndpoint wants https, no credentials, and only public addresses
// (unless HOLON_ALLOW_PRIVATE_ENDPOINTS=1). The guarded client checks the
// address again at every connection.
func (p *Publisher) CheckEndpoint(ctx context.Context, endpoint string) error {
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
	g := p.cfg.Guard
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
