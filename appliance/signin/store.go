package signin

import (
	"context"
	"encoding/json"
	"time"

	"holon.dev/holon"
)

// Session is a console session, kept by the SHA-256 of its id.
type Session struct {
	// Kind is token.KindHuman or auth.KindAdmin.
	Kind string `json:"kind"`
	// KeyHash is the SHA-256 of the key that signed in (hex).
	KeyHash string    `json:"key_hash"`
	Prefix  string    `json:"prefix,omitempty"`
	Created time.Time `json:"created"`
	Expires time.Time `json:"expires"`
}

// SessionStore keeps console sessions by the SHA-256 of their id (hex).
type SessionStore interface {
	// Get reads a session; holon.ErrNotFound when there is none.
	Get(ctx context.Context, key string) (Session, error)
	// Put stores a new session durably, deleting the one it replaces
	// (replaces: "" for none) and some that expired by now.
	Put(ctx context.Context, key string, s Session, replaces string, now time.Time) error
	// Delete deletes a session, if it is there.
	Delete(ctx context.Context, key string) error
}

// StoreSessions are console sessions kept in the gateway's store
// (holon.BucketSessions).
type StoreSessions struct{ Store holon.Store }

// Get reads a session.
func (st StoreSessions) Get(_ context.Context, key string) (Session, error) {
	var s Session
	err := st.Store.View(func(tx holon.Tx) error { return tx.Get(holon.BucketSessions, key, &s) })
	return s, err
}

// Put stores a session in one update with the deletion of the one it
// replaces and of up to 100 expired ones, so that the bucket holds live
// sessions only.
func (st StoreSessions) Put(ctx context.Context, key string, s Session, replaces string, now time.Time) error {
	return st.Store.Update(ctx, func(tx holon.Tx) error {
		if replaces != "" {
			if err := tx.Delete(holon.BucketSessions, replaces); err != nil {
				return err
			}
		}
		if err := dropExpiredSessions(tx, now, 100); err != nil {
			return err
		}
		return tx.Put(holon.BucketSessions, key, s)
	})
}

// Delete deletes a session.
func (st StoreSessions) Delete(ctx context.Context, key string) error {
	return st.Store.Update(ctx, func(tx holon.Tx) error { return tx.Delete(holon.BucketSessions, key) })
}

// dropExpiredSessions deletes up to max sessions that have expired.
func dropExpiredSessions(tx holon.Tx, now time.Time, max int) error {
	var expired []string
	err := tx.ForEach(holon.BucketSessions, "", func(key string, raw json.RawMessage) (bool, error) {
		var s Session
		if err := json.Unmarshal(raw, &s); err != nil {
			return false, err
		}
		if !now.Before(s.Expires) {
			expired = append(expired, key)
		}
		return len(expired) < max, nil
	})
	for _, key := range expired {
		if err == nil {
			err = tx.Delete(holon.BucketSessions, key)
		}
	}
	return err
}
