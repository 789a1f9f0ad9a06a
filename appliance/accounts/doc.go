// Package accounts is the room of a hosted gateway's accounts, their keys,
// their root mandates and the operator's moderation, behind one repository
// over the store: every other room reads and writes an account, a key, a
// yank or the moderation log through it, never the buckets themselves
// (holon.BucketUsers, BucketEmails, BucketKeys, BucketModLog and the
// "yanked/" settings).
//
// It serves its own routes (Mount): POST /v0/signup, GET /v0/me,
// /v0/mandates, /v0/keys, and the operator's /v0/admin/credit,
// /v0/admin/accounts, /v0/admin/agents/…/yank and /v0/admin/log.
//
// It may import, of the project: the domain (holon), journal, gateway,
// gateway/contract, and the rooms below it: appliance/token,
// appliance/web, appliance/auth, appliance/ratelimit and appliance/wire.
// It never imports the composition root (appliance) nor a room above it
// (sign-in, OAuth, publishing, the /v0 routes), which call it.
package accounts
