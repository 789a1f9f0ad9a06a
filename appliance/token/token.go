// Package token is the form of every secret the gateway hands out: account
// keys (hlk_h_…, hlk_a_…), the authorization server's codes and tokens
// (hlk_c_…, hlk_t_…, hlk_r_…), how they are drawn, parsed and stored (as
// their SHA-256, never themselves), and how they are cut out of text that
// is logged or echoed.
//
// It imports only the standard library.
package token

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base32"
	"encoding/hex"
	"fmt"
	"io"
	"regexp"
	"strings"
)

// Key kinds, as the key's own prefix says (hlk_h_…, hlk_a_…).
const (
	KindHuman = "human"
	KindAgent = "agent"
)

// Markers of the secrets: each starts with its own, so that a secret names
// what it is and Redact finds it in free text.
const (
	MarkerHuman   = "hlk_h_"
	MarkerAgent   = "hlk_a_"
	MarkerCode    = "hlk_c_"
	MarkerAccess  = "hlk_t_"
	MarkerRefresh = "hlk_r_"
)

const (
	// Entropy is the bytes of randomness in a secret.
	Entropy = 32
	// PrefixLen is how much of a key identifies it in listings and in
	// DELETE /v0/keys/{prefix}: "hlk_a_" and 8 characters (40 bits).
	PrefixLen = 6 + 8
)

// encoding is lowercase base32 without padding: a secret's random part.
var encoding = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

// BodyLen is the length of a secret's encoded random part.
var BodyLen = encoding.EncodedLen(Entropy)

// Len is the length of a whole secret: its marker and its body.
var Len = 6 + BodyLen

// Draw draws a secret with the given marker from rand: the marker, then
// 32 random bytes in lowercase base32 (52 characters).
func Draw(rand io.Reader, marker string) (string, error) {
	b := make([]byte, Entropy)
	if _, err := io.ReadFull(rand, b); err != nil {
		return "", fmt.Errorf("draw a secret: %w", err)
	}
	return marker + encoding.EncodeToString(b), nil
}

// NewKey draws an account key of a kind (KindHuman or KindAgent).
func NewKey(rand io.Reader, kind string) (string, error) {
	if kind == KindHuman {
		return Draw(rand, MarkerHuman)
	}
	return Draw(rand, MarkerAgent)
}

// ParseKey returns the kind of a well-formed account key.
func ParseKey(s string) (kind string, ok bool) {
	switch {
	case strings.HasPrefix(s, MarkerHuman):
		kind = KindHuman
	case strings.HasPrefix(s, MarkerAgent):
		kind = KindAgent
	default:
		return "", false
	}
	return kind, WellFormed(s, s[:6])
}

// WellFormed reports whether s is marker followed by a body of the right
// length and alphabet.
func WellFormed(s, marker string) bool {
	body, ok := strings.CutPrefix(s, marker)
	if !ok || len(body) != BodyLen {
		return false
	}
	for i := 0; i < len(body); i++ {
		if c := body[i]; !(c >= 'a' && c <= 'z' || c >= '2' && c <= '7') {
			return false
		}
	}
	return true
}

// Hash is the only form in which a secret is stored: its SHA-256, in hex.
func Hash(secret string) string {
	h := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(h[:])
}

// Prefix is the part of a key that names it in listings and logs.
func Prefix(key string) string { return key[:PrefixLen] }

// Equal compares a secret with the SHA-256 of the one expected, in
// constant time; a nil want matches nothing.
func Equal(secret string, want []byte) bool {
	if want == nil {
		return false
	}
	sum := sha256.Sum256([]byte(secret))
	return subtle.ConstantTimeCompare(sum[:], want) == 1
}

// Sum is the SHA-256 of a secret, the form Equal compares with.
func Sum(secret string) []byte {
	sum := sha256.Sum256([]byte(secret))
	return sum[:]
}

// like matches what could be a secret, or most of one, in free text.
var like = regexp.MustCompile(`hlk_[hactr]_[a-z2-7]{8}[a-z2-7]+`)

// Redact cuts anything that looks like a secret down to its prefix, for
// text that is logged or echoed (a key pasted into a URL by mistake).
func Redact(s string) string {
	if !strings.Contains(s, "hlk_") {
		return s
	}
	return like.ReplaceAllStringFunc(s, func(k string) string { return k[:PrefixLen] + "…" })
}
