package backup

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	"holon.dev/holon"
)

// CheckPublished is the check of published versions, endpoint credentials
// and GitHub sign-in state.
const CheckPublished = "published"

// The shapes of the publishing records, as the hosted product writes them
// (the backup reads them without importing it).
type (
	publishedDoc struct {
		ID      string `json:"id"`
		Version string `json:"version"`
	}
	sealedCredential struct {
		V      int       `json:"v"`
		Nonce  []byte    `json:"nonce"`
		Sealed []byte    `json:"sealed"`
		Set    time.Time `json:"set"`
	}
	signinRecord struct {
		Handle  string    `json:"handle"`
		New     bool      `json:"new"`
		Expires time.Time `json:"expires"`
	}
	linkedUser struct {
		GitHub *struct {
			ID int64 `json:"id"`
		} `json:"github"`
	}
)

// gcmNonce and gcmTag are the sizes of an AES-256-GCM nonce and tag.
const (
	gcmNonce = 12
	gcmTag   = 16
)

var (
	agentIDRE = regexp.MustCompile(`^[a-z0-9]+(-[a-z0-9]+)*/[a-z0-9_-]{1,64}$`)
	sha256RE  = regexp.MustCompile(`^[0-9a-f]{64}$`)
)

// published checks that every published version is stored under its own
// ns/name@version with a yank time that reads; that every endpoint
// credential is sealed (AES-256-GCM: a 12-byte nonce and a ciphertext
// longer than its tag) under a well-formed agent id; and that sign-in state
// is well formed: GitHub links point at accounts linked back to the same
// GitHub id, and login codes at existing accounts.
func (v *verifier) published() error {
	c := v.c[CheckPublished]
	versions, yanked := 0, 0
	err := v.tx.ForEachAgent(func(ref string, d holon.Doc) error {
		if !d.Published {
			return nil
		}
		versions++
		var m publishedDoc
		if err := json.Unmarshal(d.Doc, &m); err != nil || m.ID+"@"+m.Version != ref {
			c.fail("published version %s: its manifest is %s@%s", ref, m.ID, m.Version)
		}
		if d.Yanked != "" {
			yanked++
			if _, err := time.Parse(time.RFC3339, d.Yanked); err != nil {
				c.fail("published version %s: yanked %q is not a time", ref, d.Yanked)
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	creds := 0
	err = v.tx.ForEach(holon.BucketCredentials, "", func(id string, raw json.RawMessage) (bool, error) {
		creds++
		var cr sealedCredential
		switch err := json.Unmarshal(raw, &cr); {
		case err != nil:
			c.fail("credential of %s: %v", id, err)
		case !agentIDRE.MatchString(id):
			c.fail("credential under %q, which is not an agent id", id)
		case cr.V != 1 || len(cr.Nonce) != gcmNonce || len(cr.Sealed) <= gcmTag:
			c.fail("credential of %s is not a sealed token (version %d, %d-byte nonce, %d sealed bytes)", id, cr.V, len(cr.Nonce), len(cr.Sealed))
		}
		return true, nil
	})
	if err != nil {
		return err
	}
	links, pending := 0, 0
	err = v.tx.ForEach(holon.BucketSignIn, "", func(key string, raw json.RawMessage) (bool, error) {
		kind, rest, _ := strings.Cut(key, "/")
		switch kind {
		case "github":
			links++
			id, err := strconv.ParseInt(rest, 10, 64)
			var handle string
			var u linkedUser
			switch {
			case err != nil || id <= 0:
				c.fail("sign-in link %s: not a GitHub id", key)
			case json.Unmarshal(raw, &handle) != nil:
				c.fail("sign-in link %s: not a handle", key)
			case v.tx.Get(holon.BucketUsers, handle, &u) != nil:
				c.fail("sign-in link %s: account %s does not exist", key, handle)
			case u.GitHub == nil || u.GitHub.ID != id:
				c.fail("sign-in link %s: account %s is not linked back to GitHub id %d", key, handle, id)
			}
		case "state", "code":
			pending++
			var r signinRecord
			switch {
			case !sha256RE.MatchString(rest):
				c.fail("sign-in %s %s: not stored by its SHA-256", kind, key)
			case json.Unmarshal(raw, &r) != nil || r.Expires.IsZero():
				c.fail("sign-in %s %s: no expiry", kind, key)
			case kind == "code" && v.tx.Get(holon.BucketUsers, r.Handle, &linkedUser{}) != nil:
				c.fail("login code %s: account %q does not exist", key, r.Handle)
			}
		default:
			c.fail("sign-in record %q of no known kind", key)
		}
		return true, nil
	})
	if err != nil {
		return err
	}
	c.Covered = fmt.Sprintf("%d published versions (%d yanked), %d sealed credentials, %d GitHub links, %d sign-ins under way", versions, yanked, creds, links, pending)
	return nil
}
