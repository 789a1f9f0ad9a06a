package appliance

import (
	"bytes"
	"testing"
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
