package appliance

import "holon.dev/holon/appliance/accounts"

// The accounts room's codes, by the names the rooms still in this package
// (sign-in, OAuth, publishing) and their tests use.
const (
	CodeAccountDisabled = accounts.CodeAccountDisabled
	CodeAlreadyYanked   = accounts.CodeAlreadyYanked
)
