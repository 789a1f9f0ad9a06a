package appliance

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"time"

	"holon.dev/holon/gateway"
	"holon.dev/holon/kv"
)

// Idempotency-Key states.
const (
	idemRunning = "running"
	idemDone    = "done"
	// idemInterrupted: a restart (or a failure of the gateway itself) cut
	// the call short; whether it was billed is for the receipts to say.
	idemInterrupted = "interrupted"
)

// maxIdempotencyKey bounds the header's length.
const maxIdempotencyKey = 255

// idemRecord is what an Idempotency-Key recorded (gateway.md §7
// "Idempotent calls"): the request it was first used with, and the call's
// receipt and status once it finished. Never the output.
type idemRecord struct {
	State string `json:"state"`
	// Request is the SHA-256 of the request in canonical JSON, with the
	// mandate the call actually ran under.
	Request  string     `json:"request"`
	Receipt  string     `json:"receipt,omitempty"`
	Status   int        `json:"status,omitempty"`
	Started  time.Time  `json:"started"`
	Finished *time.Time `json:"finished,omitempty"`
}

// Records live in kv.BucketIdempotency under "key/<scope>/<key>"; a call in
// flight also has "run/<scope>/<key>", so that start-up finds the calls a
// restart interrupted without scanning every key ever used.
func idemKey(scope, key string) string    { return "key/" + scope + "/" + key }
func idemRunKey(scope, key string) string { return "run/" + scope + "/" + key }

// idempotency claims and records Idempotency-Keys. One write transaction
// decides each claim, so of any number of concurrent requests with the
// same key exactly one runs.
type idempotency struct {
	store *kv.Store
	now   func() time.Time
}

// claim is the outcome of presenting a key: either this request runs (and
// must finish or abandon the claim), or replay holds the finished call.
type claim struct {
	idem       *idempotency
	scope, key string
	replay     *idemRecord
}

func validIdempotencyKey(k string) bool {
	if len(k) < 1 || len(k) > maxIdempotencyKey {
		return false
	}
	for i := 0; i < len(k); i++ {
		if k[i] < 0x21 || k[i] > 0x7e {
			return false
		}
	}
	return true
}

// requestHash is the SHA-256 of a call request in canonical JSON (RFC
// 8785): the same call sent with other white space or key order is the
// same request.
func requestHash(body callBody) (string, error) {
	b, err := json.Marshal(body)
	if err != nil {
		return "", err
	}
	c, err := gateway.CanonicalJSON(b)
	if err != nil {
		return "", gateway.Errorf(gateway.CodeInvalidRequest, "body: %v", err)
	}
	sum := sha256.Sum256(c)
	return hex.EncodeToString(sum[:]), nil
}

// claim presents an Idempotency-Key for a request. A new key is recorded
// as running and the request runs. A known key with another request is
// refused (422 idempotency_mismatch), a running one answers 409, an
// interrupted one answers 409 for good, and a finished one is replayed.
func (d *idempotency) claim(ctx context.Context, scope, key string, body callBody) (*claim, error) {
	if !validIdempotencyKey(key) {
		return nil, gateway.Errorf(CodeInvalidIdempotencyKey, "Idempotency-Key must be 1 to %d visible ASCII characters, such as a UUID", maxIdempotencyKey)
	}
	hash, err := requestHash(body)
	if err != nil {
		return nil, err
	}
	var rec idemRecord
	var found bool
	err = d.store.Update(ctx, func(tx *kv.Tx) error {
		found = false
		err := tx.Get(kv.BucketIdempotency, idemKey(scope, key), &rec)
		if err == nil {
			found = true
			return nil
		}
		if !errors.Is(err, kv.ErrNotFound) {
			return err
		}
		rec = idemRecord{State: idemRunning, Request: hash, Started: d.now().UTC()}
		if err := tx.Put(kv.BucketIdempotency, idemKey(scope, key), rec); err != nil {
			return err
		}
		return tx.Put(kv.BucketIdempotency, idemRunKey(scope, key), true)
	})
	if err != nil {
		return nil, err
	}
	c := &claim{idem: d, scope: scope, key: key}
	if !found {
		return c, nil
	}
	switch {
	case rec.Request != hash:
		return nil, gateway.Errorf(CodeIdempotencyMismatch, "Idempotency-Key %q was used with another request: send this one with a new key", key)
	case rec.State == idemRunning:
		return nil, gateway.Errorf(CodeIdempotencyInFlight, "the call of Idempotency-Key %q is still running: wait for it, then re-send to get its receipt", key)
	case rec.State == idemInterrupted:
		return nil, gateway.Errorf(CodeIdempotencyInterrupted, "the call of Idempotency-Key %q was interrupted (a restart) and its outcome is unknown: check GET /v0/receipts, then send it again with a new key if it did not happen", key)
	}
	c.replay = &rec
	return c, nil
}

// finish records the call's receipt and status: from now on the key
// replays them.
func (c *claim) finish(ctx context.Context, receipt string, status int) error {
	return c.set(ctx, func(rec *idemRecord) {
		rec.State, rec.Receipt, rec.Status = idemDone, receipt, status
	})
}

// abandon marks the key interrupted: the gateway failed without a receipt
// to show, so the outcome is unknown and the key must not run again.
func (c *claim) abandon(ctx context.Context) {
	_ = c.set(ctx, func(rec *idemRecord) { rec.State = idemInterrupted })
}

func (c *claim) set(ctx context.Context, change func(*idemRecord)) error {
	now := c.idem.now().UTC()
	return c.idem.store.Update(context.WithoutCancel(ctx), func(tx *kv.Tx) error {
		var rec idemRecord
		if err := tx.Get(kv.BucketIdempotency, idemKey(c.scope, c.key), &rec); err != nil {
			return err
		}
		change(&rec)
		rec.Finished = &now
		if err := tx.Put(kv.BucketIdempotency, idemKey(c.scope, c.key), rec); err != nil {
			return err
		}
		return tx.Delete(kv.BucketIdempotency, idemRunKey(c.scope, c.key))
	})
}

// interruptRunning marks every key whose call was in flight when the last
// run stopped: their outcome is unknown, so they answer 409 for good. It
// runs at start-up, before serving, and returns how many it marked.
func interruptRunning(ctx context.Context, store *kv.Store, now time.Time) (int, error) {
	var n int
	err := store.Update(ctx, func(tx *kv.Tx) error {
		n = 0
		var running []string
		err := tx.ForEach(kv.BucketIdempotency, "run/", func(k string, _ json.RawMessage) (bool, error) {
			running = append(running, k)
			return true, nil
		})
		if err != nil {
			return err
		}
		for _, rk := range running {
			key := "key/" + rk[len("run/"):]
			var rec idemRecord
			if err := tx.Get(kv.BucketIdempotency, key, &rec); err != nil {
				return err
			}
			if rec.State == idemRunning {
				rec.State = idemInterrupted
				t := now.UTC()
				rec.Finished = &t
				if err := tx.Put(kv.BucketIdempotency, key, rec); err != nil {
					return err
				}
				n++
			}
			if err := tx.Delete(kv.BucketIdempotency, rk); err != nil {
				return err
			}
		}
		return nil
	})
	return n, err
}
