package publishing

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
	// CodeInvalidCredential: the endpoint token of a credential is
	// malformed (a field of the body: 400, unlike invalid_token, a bearer
	// token refused).
	CodeInvalidCredential = "invalid_credential"
	CodeCredentialsOff    = "credentials_unavailable"
	CodeDraftCallFailed   = "draft_call_failed"
	// codeGitHubNotConfigured is the sign-in room's code for a gateway
	// without a GitHub app, which publishing needs.
	codeGitHubNotConfigured = "github_not_configured"
)
