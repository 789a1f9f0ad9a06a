package files

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"strconv"
	"time"

	"holon.dev/holon"
)

// Signer signs and checks download links: an HMAC-SHA256, under a key
// derived from HOLON_FILE_SECRET, of the file's id and the link's expiry.
// Changing either breaks the signature.
type Signer struct {
	key []byte
}

func (l *Signer) mac(id, exp string) []byte {
	m := hmac.New(sha256.New, l.key)
	m.Write([]byte("holon file link v1\x00"))
	m.Write([]byte(id))
	m.Write([]byte{0})
	m.Write([]byte(exp))
	return m.Sum(nil)
}

// Path is the signed path of a link to file id, valid until exp.
func (l *Signer) Path(id string, exp time.Time) string {
	e := expiresString(exp)
	return "/v0/files/" + id + "?exp=" + e + "&sig=" + base64.RawURLEncoding.EncodeToString(l.mac(id, e))
}

// Verify checks a link's signature in constant time (the MAC is computed
// and compared whatever the parameters look like), then its expiry.
func (l *Signer) Verify(id, exp, sig string, now time.Time) error {
	want := l.mac(id, exp)
	got, decErr := base64.RawURLEncoding.DecodeString(sig)
	if len(got) != len(want) {
		got = make([]byte, len(want))
	}
	match := hmac.Equal(want, got) && decErr == nil
	if !match {
		return holon.Errorf(CodeInvalidLink, "this link's signature does not match: use the url the gateway gave, unchanged")
	}
	t, err := strconv.ParseInt(exp, 10, 64)
	if err != nil || !now.Before(time.Unix(t, 0)) {
		return holon.Errorf(CodeInvalidLink, "this link expired at %s: links live 15 minutes, the next call gets a new one",
			time.Unix(t, 0).UTC().Format(time.RFC3339))
	}
	return nil
}

// NewSigner returns a signer of links under key.
func NewSigner(key []byte) *Signer { return &Signer{key: key} }
