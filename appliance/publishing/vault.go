package publishing

import (
	"crypto/aes"
	"crypto/cipher"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"

	"holon.dev/holon"
	"holon.dev/holon/appliance/token"
)

// Endpoint credentials (gateway.md §6 "Authentication"): the token an
// author's server wants, set once per agent (ns/name, every version) and
// sent as Authorization: Bearer on every call and evaluation. It is stored
// sealed with AES-256-GCM under a key derived from HOLON_FILE_SECRET by
// HKDF-SHA256 with its own purpose label, bound to the agent id (the
// additional data), so a sealed token copied onto another agent does not
// open. No endpoint returns it: views say only whether one is set.

// maxTokenLen bounds an endpoint token.
const maxTokenLen = 4096

// credentialRecord is a sealed token (holon.BucketCredentials, by agent id).
type credentialRecord struct {
	V      int       `json:"v"`
	Nonce  []byte    `json:"nonce"`
	Sealed []byte    `json:"sealed"`
	Set    time.Time `json:"set"`
}

// Vault seals and opens endpoint tokens, and keeps the open ones in
// memory for the runners (the store holds them sealed only).
type Vault struct {
	aead  cipher.AEAD // nil without HOLON_FILE_SECRET
	store holon.Store
	rand  io.Reader
	mu    sync.RWMutex
	open  map[string]string
}

// NewVault derives the key and opens every stored token. A token that
// does not open (HOLON_FILE_SECRET changed) is left out and logged by
// agent id: its author sets it again.
func NewVault(secret []byte, store holon.Store, rand io.Reader, log *slog.Logger) (*Vault, error) {
	v := &Vault{store: store, rand: rand, open: map[string]string{}}
	if len(secret) == 0 {
		return v, nil
	}
	block, err := aes.NewCipher(token.DeriveKey(secret, token.LabelCredentials))
	if err != nil {
		return nil, err
	}
	if v.aead, err = cipher.NewGCM(block); err != nil {
		return nil, err
	}
	err = store.View(func(tx holon.Tx) error {
		return tx.ForEach(holon.BucketCredentials, "", func(id string, raw json.RawMessage) (bool, error) {
			var rec credentialRecord
			if err := json.Unmarshal(raw, &rec); err != nil {
				return false, fmt.Errorf("credential of %s: %w", id, err)
			}
			tok, err := v.aead.Open(nil, rec.Nonce, rec.Sealed, []byte(id))
			if err != nil {
				log.Warn("endpoint credential does not open with this HOLON_FILE_SECRET: its author must set it again", "agent", id)
				return true, nil
			}
			v.open[id] = string(tok)
			return true, nil
		})
	})
	return v, err
}

// Token is the runners' lookup (remote.Config.Credentials): the open
// token of an agent, if one is set.
func (v *Vault) Token(agentID string) (string, bool) {
	v.mu.RLock()
	defer v.mu.RUnlock()
	t, ok := v.open[agentID]
	return t, ok
}

// Has reports whether an agent has a token set that opens.
func (v *Vault) Has(agentID string) bool {
	_, ok := v.Token(agentID)
	return ok
}

func (v *Vault) seal(agentID, token string, now time.Time) (credentialRecord, error) {
	nonce := make([]byte, v.aead.NonceSize())
	if _, err := io.ReadFull(v.rand, nonce); err != nil {
		return credentialRecord{}, fmt.Errorf("draw a nonce: %w", err)
	}
	return credentialRecord{V: 1, Nonce: nonce, Sealed: v.aead.Seal(nil, nonce, []byte(token), []byte(agentID)), Set: now}, nil
}
