package appliance

import (
	"bytes"
	"net/url"
	"testing"
	"time"
)

// Ensure that deriveKey gives each purpose its own stable 32-byte key from
// HOLON_FILE_SECRET, and none without the secret.
func TestConfig_DeriveKey(t *testing.T) {
	c := &Config{FileSecret: "f1Le-S3cret-9aZ7qW2xE4rT6yU8iO0pL5kJ"}
	links, again, creds := c.deriveKey("file links"), c.deriveKey("file links"), c.deriveKey("credentials")
	if len(links) != 32 || !bytes.Equal(links, again) || bytes.Equal(links, creds) || bytes.Contains([]byte(c.FileSecret), links) {
		t.Errorf("keys %x, %x, %x", links, again, creds)
	}
	other := &Config{FileSecret: c.FileSecret + "x"}
	if bytes.Equal(other.deriveKey("file links"), links) {
		t.Error("another secret gives the same key")
	}
	if k := (&Config{}).deriveKey("file links"); k != nil {
		t.Errorf("no secret: %x", k)
	}
}

// Ensure that a link verifies until its expiry and not after, and that an
// exp that is not a decimal number, or another key, is refused.
func TestLinkSigner_Verify(t *testing.T) {
	s := &linkSigner{key: bytes.Repeat([]byte{7}, 32)}
	now := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	exp := now.Add(FileLinkTTL)
	u, err := url.Parse(s.path("0123456789abcdef01234567", exp))
	if err != nil {
		t.Fatal(err)
	}
	id, q := "0123456789abcdef01234567", u.Query()
	if err := s.verify(id, q.Get("exp"), q.Get("sig"), now); err != nil {
		t.Errorf("a fresh link: %v", err)
	}
	if err := s.verify(id, q.Get("exp"), q.Get("sig"), exp); err == nil {
		t.Error("a link at its expiry verifies")
	}
	for name, exp := range map[string]string{"not a number": "soon", "with a sign": "+" + q.Get("exp"), "empty": ""} {
		if err := s.verify(id, exp, q.Get("sig"), now); err == nil {
			t.Errorf("exp %s verifies", name)
		}
	}
	other := &linkSigner{key: bytes.Repeat([]byte{8}, 32)}
	if err := other.verify(id, q.Get("exp"), q.Get("sig"), now); err == nil {
		t.Error("another key verifies the link")
	}
}
