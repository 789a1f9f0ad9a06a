package files_test

import (
	"bytes"
	"net/url"
	"testing"
	"time"

	"holon.dev/holon/appliance/files"
)

// Ensure that a link verifies until its expiry and not after, and that an
// exp that is not a decimal number, or another key, is refused.
func TestLinkSigner_Verify(t *testing.T) {
	s := files.NewSigner(bytes.Repeat([]byte{7}, 32))
	now := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	exp := now.Add(files.FileLinkTTL)
	u, err := url.Parse(s.Path("0123456789abcdef01234567", exp))
	if err != nil {
		t.Fatal(err)
	}
	id, q := "0123456789abcdef01234567", u.Query()
	if err := s.Verify(id, q.Get("exp"), q.Get("sig"), now); err != nil {
		t.Errorf("a fresh link: %v", err)
	}
	if err := s.Verify(id, q.Get("exp"), q.Get("sig"), exp); err == nil {
		t.Error("a link at its expiry verifies")
	}
	for name, exp := range map[string]string{"not a number": "soon", "with a sign": "+" + q.Get("exp"), "empty": ""} {
		if err := s.Verify(id, exp, q.Get("sig"), now); err == nil {
			t.Errorf("exp %s verifies", name)
		}
	}
	other := files.NewSigner(bytes.Repeat([]byte{8}, 32))
	if err := other.Verify(id, q.Get("exp"), q.Get("sig"), now); err == nil {
		t.Error("another key verifies the link")
	}
}
