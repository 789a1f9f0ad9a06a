package holon

// App buckets hold the hosted product's records (accounts, keys,
// idempotency keys, the moderation log, …) as JSON documents the store does
// not interpret. They are reached by name through Put/Get/Delete/ForEach/
// Append; the journal, receipts, budgets and holds are not app buckets, so
// their rules cannot be bypassed through this door.
const (
	BucketUsers       = "users"       // handle → account record
	BucketEmails      = "emails"      // email → handle
	BucketKeys        = "keys"        // sha256(key) → key record
	BucketIdempotency = "idempotency" // key hash + idempotency key → record
	BucketModLog      = "modlog"      // seq → moderation action (append-only)
	BucketCredentials = "credentials" // agent id → encrypted endpoint token
	BucketFiles       = "files"       // file id → file record
	BucketSettings    = "settings"    // name → value
	BucketSessions    = "sessions"    // sha256(console session id) → session record
	BucketEvals       = "evals"       // agent ref → last evaluation
	BucketEvalQueue   = "eval_queue"  // agent ref → evaluation waiting or running
	BucketOAuth       = "oauth"       // OAuth clients, and sha256(code or token) → its grant
)

// IdempotencyLogPrefix starts the keys of BucketIdempotency that are a
// log: each is written once, in order, and then only read or deleted (the
// hosted product's log of finished keys). A store that logs its commits
// may keep such rows in its log and in memory, and put them into its file
// later, many at a time.
const IdempotencyLogPrefix = "log/"

// BucketSignIn holds GitHub sign-in state that must outlive a restart:
// "state/<sha256>" (10 minutes), "code/<sha256>" (2 minutes) and
// "github/<id>" → handle, the link of a GitHub account to its account.
const BucketSignIn = "signin"
