package publishing

import (
	"context"
	"errors"
	"strconv"
	"strings"

	"holon.dev/holon"
	"holon.dev/holon/appliance/github"
	"holon.dev/holon/appliance/wire"
)

// GitHubSources is Config.Sources asked of GitHub through c: it wants
// source.repository to be a public GitHub repository of the author's
// GitHub account, or of an organisation that lists that account as a
// public member.
func GitHubSources(c *github.Client) func(ctx context.Context, repository string, link *wire.GitHubLink) error {
	return func(ctx context.Context, repository string, link *wire.GitHubLink) error {
		return checkSource(ctx, c, repository, link)
	}
}

// checkSource wants source.repository to be a public GitHub repository of
// the author's GitHub account, or of an organisation that lists that
// account as a public member.
func checkSource(ctx context.Context, gh *github.Client, repository string, link *wire.GitHubLink) error {
	path := strings.TrimSuffix(strings.TrimPrefix(repository, "https://github.com/"), ".git")
	owner, name, _ := strings.Cut(strings.TrimSuffix(path, "/"), "/")
	rp, err := gh.Repo(ctx, owner, name)
	var ge *github.Error
	switch {
	case errors.Is(err, github.ErrNotFound):
		return holon.Errorf(CodeRepositoryNotFound, "source.repository %s is private or does not exist: an open-source agent names its public GitHub repository (or publish it as proprietary)", repository)
	case errors.As(err, &ge) && ge.Unavailable:
		return githubUnavailable(ge)
	case err != nil:
		return holon.Errorf(github.CodeUnavailable, "checking source.repository on GitHub failed: %v; try again", err)
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
		ok, err := gh.PublicMember(ctx, rp.Owner.Login, link.Login)
		if errors.As(err, &ge) && ge.Unavailable {
			return githubUnavailable(ge)
		} else if err != nil {
			return holon.Errorf(github.CodeUnavailable, "checking %s's members on GitHub failed: %v; try again", rp.Owner.Login, err)
		}
		if !ok {
			return holon.Errorf(CodeNotPublicMember, "source.repository %s belongs to the organisation %s, which does not list %s as a public member: make your membership public on GitHub, then publish again", repository, rp.Owner.Login, link.Login)
		}
		return nil
	}
	return holon.Errorf(CodeRepositoryNotYours, "source.repository %s belongs to %s, a GitHub %s: only users and organisations can list agents", repository, rp.Owner.Login, rp.Owner.Type)
}

// githubUnavailable is the 503 of a GitHub outage or rate limit.
func githubUnavailable(ge *github.Error) error {
	msg := "GitHub cannot answer now (" + ge.Message + "): try again"
	if ge.RetryAfter > 0 {
		msg += " in " + strconv.Itoa(int(ge.RetryAfter.Seconds())+1) + " s"
	}
	return holon.Errorf(github.CodeUnavailable, "%s", msg)
}
