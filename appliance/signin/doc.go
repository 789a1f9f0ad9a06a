// Package signin is the room of signing people in: GitHub sign-in (the
// start, the callback that finds, links or creates the account, and the
// login code a browser trades for its keys, bound to that browser), the
// GitHub side of an email signup (the first GitHub sign-in that proves an
// account's email takes the account over, revoking every earlier key),
// and the console sessions, kept behind a SessionStore (the gateway's
// store by default).
//
// It may import, of the project: the domain (holon) and the rooms below
// it: appliance/accounts (the accounts, keys and moderation log it reads
// and writes), appliance/auth, appliance/github, appliance/origin,
// appliance/ratelimit, appliance/token, appliance/web and appliance/wire.
// It never imports the composition root (appliance) nor the rooms above
// it (the console, OAuth, publishing), which it knows only through the
// hook the root hands it (Config.Claimed).
package signin
