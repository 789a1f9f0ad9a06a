package token

import (
	"crypto/hkdf"
	"crypto/sha256"
)

// The HKDF labels of the keys derived from HOLON_FILE_SECRET, one per
// use, so that each use of the secret has a key of its own. They are
// fixed: a key derived under another label would orphan what was signed
// or sealed under it (the credentials' label predates the "holon
// <purpose>" form and keeps its own for that reason).
const (
	// LabelFileLinks derives the key that signs file download links.
	LabelFileLinks = "holon file links"
	// LabelCredentials derives the key that seals endpoint credentials.
	LabelCredentials = "holon/endpoint-credentials/v1"
)

// DeriveKey is the one derivation of a key from the secret:
// HKDF-SHA256, 32 bytes, under label.
func DeriveKey(secret []byte, label string) []byte {
	k, err := hkdf.Key(sha256.New, secret, nil, label, 32)
	if err != nil {
		panic(err) // only for a length HKDF-SHA256 cannot give
	}
	return k
}
