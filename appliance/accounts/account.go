package accounts

import (
	"encoding/json"
	"errors"
	"net/mail"
	"strings"
	"time"

	"holon.dev/holon"
	"holon.dev/holon/appliance/wire"
	"holon.dev/holon/gateway/contract"
)

// Account is a hosted account (holon.BucketUsers, by handle). Its money is
// the journal account of the same name.
type Account struct {
	Handle  string    `json:"handle"`
	Email   string    `json:"email"`
	Created time.Time `json:"created"`
	// Mandates are the root mandates the account issued, oldest first.
	Mandates []string  `json:"mandates"`
	Disabled *Disabled `json:"disabled,omitempty"`
	// GitHub is the GitHub account linked by signing in (publishing needs it).
	GitHub *wire.GitHubLink `json:"github,omitempty"`
	// Claimed is set when a GitHub sign-in that proved the account's
	// email took the account over from its unproved signup.
	Claimed *wire.Claim `json:"claimed,omitempty"`
}

// Disabled says when and why the operator disabled an account.
type Disabled struct {
	At     time.Time `json:"at"`
	Reason string    `json:"reason"`
}

// emailRecord maps a normalized email to its account (holon.BucketEmails):
// one account per email, and a disabled account's email stays barred.
type emailRecord struct {
	Handle   string `json:"handle"`
	Disabled bool   `json:"disabled,omitempty"`
}

// Get reads the account of handle; holon.ErrNotFound when there is none.
func Get(tx holon.Tx, handle string) (*Account, error) {
	acct := new(Account)
	if err := tx.Get(holon.BucketUsers, handle, acct); err != nil {
		return nil, err
	}
	return acct, nil
}

// Put stores an account that exists (its email and handle unchanged).
func Put(tx holon.Tx, acct *Account) error { return tx.Put(holon.BucketUsers, acct.Handle, acct) }

// ByEmail finds the account of a normalized email: its handle, and
// whether the email is barred by a disabled account; holon.ErrNotFound
// when no account has it.
func ByEmail(tx holon.Tx, email string) (handle string, disabled bool, err error) {
	var er emailRecord
	if err := tx.Get(holon.BucketEmails, email, &er); err != nil {
		return "", false, err
	}
	return er.Handle, er.Disabled, nil
}

// Each calls fn with every account, by handle, until fn returns false.
func Each(tx holon.Tx, fn func(*Account) (bool, error)) error {
	return tx.ForEach(holon.BucketUsers, "", func(_ string, raw json.RawMessage) (bool, error) {
		acct := new(Account)
		if err := json.Unmarshal(raw, acct); err != nil {
			return false, err
		}
		return fn(acct)
	})
}

// reservedHandles would collect other people's money or pass for the
// platform: the platform's own names, the project's names, and the words a
// visitor would take for an official account. The registry's author
// namespaces are reserved besides, and any handle starting with "holon-".
var reservedHandles = map[string]bool{
	// The platform's accounts and names.
	"holon": true, "external": true, "platform": true, "gateway": true, "operator": true,
	"holon-labs": true, "holonlabs": true, "holon-dev": true, "holondev": true, "holon-hq": true,
	// Roles and services.
	"admin": true, "administrator": true, "root": true, "system": true, "sysadmin": true,
	"support": true, "security": true, "billing": true, "payments": true, "help": true,
	"status": true, "staff": true, "team": true, "official": true, "moderator": true,
	"moderation": true, "abuse": true, "legal": true, "privacy": true, "terms": true,
	"compliance": true, "trust": true, "safety": true, "sales": true, "contact": true,
	"info": true, "noreply": true, "no-reply": true, "postmaster": true, "hostmaster": true,
	"webmaster": true, "mail": true, "email": true,
	// Parts of the site and the API.
	"api": true, "www": true, "app": true, "console": true, "docs": true, "blog": true,
	"static": true, "assets": true, "cdn": true, "mcp": true, "healthz": true, "v0": true,
	"v1": true, "auth": true, "oauth": true, "login": true, "logout": true, "signup": true,
	"signin": true, "register": true, "account": true, "accounts": true, "me": true,
	"settings": true, "keys": true, "agents": true, "catalog": true, "catalogue": true,
	"files": true, "demo": true, "mandates": true, "receipts": true, "approvals": true,
	"github": true, "anthropic": true, "claude": true, "openai": true,
	// Words that mean nobody.
	"null": true, "nil": true, "none": true, "undefined": true, "anonymous": true,
	"unknown": true, "test": true, "example": true,
}

// CheckHandle applies the handle rules: 2 to 39 characters with the
// syntax of GitHub logins, lowercase, not reserved and not the namespace
// of an agent author in the registry.
func (r *Repo) CheckHandle(handle string) error {
	rules := "2 to 39 lowercase letters, digits and single hyphens, not starting or ending with a hyphen (like a GitHub login)"
	switch {
	case handle == "":
		return holon.Errorf(CodeInvalidHandle, "handle is required: %s", rules)
	case strings.ToLower(handle) != handle && contract.ValidHandle(strings.ToLower(handle)):
		return holon.Errorf(CodeInvalidHandle, "handles are lowercase: use %q", strings.ToLower(handle))
	case !contract.ValidHandle(handle):
		return holon.Errorf(CodeInvalidHandle, "%q is not a handle: %s", handle, rules)
	case reservedHandles[handle] || strings.HasPrefix(handle, "holon-") || r.authors[handle]:
		return holon.Errorf(CodeHandleTaken, "the handle %q is reserved: pick another", handle)
	}
	return nil
}

// NormalizeEmail lowercases and checks an address: one bare address
// (no name, no angle brackets), at most 254 characters, a dotted domain.
func NormalizeEmail(s string) (string, error) {
	e := strings.ToLower(strings.TrimSpace(s))
	if e == "" {
		return "", holon.Errorf(CodeInvalidEmail, "email is required")
	}
	addr, err := mail.ParseAddress(e)
	_, domain, _ := strings.Cut(e, "@")
	if err != nil || addr.Address != e || addr.Name != "" || len(e) > 254 ||
		!strings.Contains(domain, ".") || strings.HasPrefix(domain, ".") || strings.HasSuffix(domain, ".") {
		return "", holon.Errorf(CodeInvalidEmail, "%q is not an email address such as ada@example.com", s)
	}
	return e, nil
}

// Create stores a new account (handle, email and, from a GitHub
// sign-in, its link), its email, and its starter mandate with the signup
// credit, refusing a handle or an email already taken.
func (r *Repo) Create(tx holon.Tx, acct Account) error {
	if err := handleFree(tx, acct.Handle); err != nil {
		return err
	}
	switch _, disabled, err := ByEmail(tx, acct.Email); {
	case err == nil && disabled:
		return holon.Errorf(CodeEmailDisabled, "this email belongs to a disabled account and cannot sign up again")
	case err == nil:
		return holon.Errorf(CodeEmailTaken, "this email has an account already: use its keys")
	case !errors.Is(err, holon.ErrNotFound):
		return err
	}
	sandbox := r.StarterMandate(acct.Handle)
	acct.Created, acct.Mandates = r.now().UTC(), []string{sandbox.ID}
	if err := Put(tx, &acct); err != nil {
		return err
	}
	if err := tx.Put(holon.BucketEmails, acct.Email, emailRecord{Handle: acct.Handle}); err != nil {
		return err
	}
	return r.engine.PutMandateTx(tx, sandbox)
}

// Disable marks an account disabled at now, bars its email from signing
// up again and revokes every live key of it; it returns how many keys it
// revoked.
func Disable(tx holon.Tx, acct *Account, reason string, now time.Time) (int, error) {
	acct.Disabled = &Disabled{At: now, Reason: reason}
	if err := Put(tx, acct); err != nil {
		return 0, err
	}
	if err := tx.Put(holon.BucketEmails, acct.Email, emailRecord{Handle: acct.Handle, Disabled: true}); err != nil {
		return 0, err
	}
	return RevokeLiveKeys(tx, acct.Handle, now)
}

// handleFree refuses a handle that has an account, money or mandates
// already (an operator's mandates directory can name accounts that never
// signed up: their money is not up for grabs).
func handleFree(tx holon.Tx, handle string) error {
	taken := holon.Errorf(CodeHandleTaken, "the handle %q is taken: pick another", handle)
	if _, err := Get(tx, handle); err == nil {
		return taken
	} else if !errors.Is(err, holon.ErrNotFound) {
		return err
	}
	if tx.HasEntry("signup:" + handle) {
		return taken
	}
	bal, err := tx.Account(handle)
	if err != nil {
		return err
	}
	if bal != (holon.Account{}) {
		return taken
	}
	if _, err := tx.Mandate(handle + "/sandbox"); err == nil {
		return taken
	}
	return nil
}
