// Package publishing is the room of the agents authors list on a hosted
// gateway: publishing a version (POST /v0/agents) once its rules hold,
// yanking it, drafting a webhook listing from one call
// (POST /v0/agents/draft), and the endpoint credentials an author's
// server wants (the Vault, PUT/DELETE /v0/agents/{ns}/{name}/credential,
// GET /v0/me/credentials). List is the one path by which a version is
// stored as published and listed; Load lists the published versions again
// at start-up.
//
// It may import, of the project: the domain (holon), journal, gateway,
// gateway/contract, gateway/remote, and the rooms appliance/token,
// appliance/web, appliance/auth, appliance/wire, appliance/accounts
// (an author's account and the operator's yanks) and appliance/github
// (GitHubSources: whether a repository is its author's, the usual
// Config.Sources). It never imports the composition root (appliance) nor
// the /v0 routes.
package publishing
