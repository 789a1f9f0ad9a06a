package accounts

// Error codes of accounts, keys, mandates and moderation. Each one comes
// with a message that says what to fix; their HTTP statuses are web's
// table.
const (
	// CodeInvalidHandle and CodeInvalidEmail: a signup's fields are malformed.
	CodeInvalidHandle = "invalid_handle"
	CodeInvalidEmail  = "invalid_email"
	// CodeHandleTaken: the handle has an account already, or is reserved.
	CodeHandleTaken = "handle_taken"
	// CodeEmailTaken: the email has an account already.
	CodeEmailTaken = "email_taken"
	// CodeEmailDisabled: the email belongs to a disabled account.
	CodeEmailDisabled = "email_disabled"
	// CodeMandateExists: a mandate with this id exists already.
	CodeMandateExists = "mandate_exists"
	// CodeLimitReached: an account holds as many mandates or keys as it may.
	CodeLimitReached = "limit_reached"
	// CodeKeyRevoked: the key named is revoked already.
	CodeKeyRevoked = "key_revoked"
	// CodeAccountDisabled: the account is disabled: it is given no key
	// (403).
	CodeAccountDisabled = "account_disabled"
	// CodeAlreadyDisabled: the operator disables an account disabled
	// already (409).
	CodeAlreadyDisabled = "already_disabled"
	// CodeShippedAgent: agents shipped with the gateway are not moderated.
	CodeShippedAgent = "shipped_agent"
	// CodeAlreadyYanked: the agent version was withdrawn already.
	CodeAlreadyYanked = "already_yanked"
)
