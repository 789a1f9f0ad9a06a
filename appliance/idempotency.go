package appliance

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"holon.dev/holon"
	"holon.dev/holon/gateway"
	"holon.dev/holon/gateway/canonical"
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

// Records live in holon.BucketIdempotency: a call in flight under
// "run/<scope>/<key>" (few, and together, so that claiming a key rewrites
// one small region of the index and start-up finds the calls a restart cut
// short without scanning every key ever used), a finished or interrupted
// one under "key/<scope>/<key>", written once. (A store written before this
// layout has running records under key/ with a run/ marker of true; they
// are read as such.)
func idemKey(scope, key string) string    { return "key/" + scope + "/" + key }
func idemRunKey(scope, key string) string { return "run/" + scope + "/" + key }

// idempotency makes the claims of Idempotency-Keys. A claim is checked
// and recorded inside the call's own write transactions (gateway.Claim):
// the key's claim with the reservation, its outcome with the settlement,
// so an idempotent call costs no commit of its own, and one transaction
// decides each claim, so of any number of concurrent requests with the
// same key exactly one runs. A finished key lives ttl: past it, the key
// is unknown again, whether or not the sweep has deleted it yet.
type idempotency struct {
	store holon.Store
	now   func() time.Time
	ttl   time.Duration
	// onSweep, when set, is told how many records each of the sweep's
	// write transactions deleted (tests).
	onSweep func(deleted int)
}

// claim is an Idempotency-Key presented with a call: a gateway.Claim.
type claim struct {
	idem       *idempotency
	scope, key string
	hash       string
	// receipt is the call's receipt once the key is recorded as running
	// (set in the reservation's transaction, which nothing replays once
	// the call runs).
	receipt string
}

// replayError stops a call whose key already finished: the answer is the
// recorded one.
type replayError struct{ rec idemRecord }

func (e *replayError) Error() string { return "idempotency key already used: replay " + e.rec.Receipt }

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
	c, err := canonical.JSON(b)
	if err != nil {
		return "", holon.Errorf(holon.CodeInvalidRequest, "body: %v", err)
	}
	sum := sha256.Sum256(c)
	return hex.EncodeToString(sum[:]), nil
}

// claim presents an Idempotency-Key for a request; the call checks and
// records it (gateway.CallInput.Claim).
func (d *idempotency) claim(scope, key string, body callBody) (*claim, error) {
	if !validIdempotencyKey(key) {
		return nil, holon.Errorf(CodeInvalidIdempotencyKey, "Idempotency-Key must be 1 to %d visible ASCII characters, such as a UUID", maxIdempotencyKey)
	}
	hash, err := requestHash(body)
	if err != nil {
		return nil, err
	}
	return &claim{idem: d, scope: scope, key: key, hash: hash}, nil
}

// Check lets a new key through, and a key whose lifetime has passed. A
// known key with another request is refused (422 idempotency_mismatch), a
// running one answers 409, one whose call a restart cut short answers 409
// idempotency_interrupted, and a finished one stops the call with a
// *replayError.
func (c *claim) Check(tx holon.Tx) error {
	rec, found, err := c.lookup(tx)
	switch {
	case err != nil:
		return err
	case !found:
		return nil
	case rec.Request != c.hash:
		return holon.Errorf(CodeIdempotencyMismatch, "Idempotency-Key %q was used with another request: send this one with a new key", c.key)
	case rec.State == idemRunning:
		return holon.Errorf(CodeIdempotencyInFlight, "the call of Idempotency-Key %q is still running: wait for it, then re-send to get its receipt", c.key)
	case rec.State == idemInterrupted:
		return holon.Errorf(CodeIdempotencyInterrupted, "the call of Idempotency-Key %q was interrupted (a restart) before it settled: check GET /v0/receipts, then send it again with a new key if it did not happen", c.key)
	}
	return &replayError{rec: rec}
}

// Key is the key with its scope: a gateway.Claim.
func (c *claim) Key() string { return c.scope + "/" + c.key }

// Running refuses the key while another call of it runs in memory, as
// Check refuses a running record: 422 for another request, else 409.
func (c *claim) Running(other gateway.Claim) error {
	if o, ok := other.(*claim); ok && o.hash != c.hash {
		return holon.Errorf(CodeIdempotencyMismatch, "Idempotency-Key %q was used with another request: send this one with a new key", c.key)
	}
	return holon.Errorf(CodeIdempotencyInFlight, "the call of Idempotency-Key %q is still running: wait for it, then re-send to get its receipt", c.key)
}

// lookup reads the key's record: finished or interrupted under key/,
// running under run/. A finished record past its lifetime is absent: the
// key runs as a new one, and its new record replaces the old.
func (c *claim) lookup(tx holon.Tx) (idemRecord, bool, error) {
	var rec idemRecord
	err := tx.Get(holon.BucketIdempotency, idemKey(c.scope, c.key), &rec)
	if err == nil && !c.idem.expired(rec, c.idem.now()) {
		return rec, true, nil
	}
	if err != nil && !errors.Is(err, holon.ErrNotFound) {
		return rec, false, err
	}
	rec = idemRecord{}
	if rec, ok, err := runningRecord(tx, idemRunKey(c.scope, c.key)); ok || err != nil {
		return rec, ok, err
	}
	return rec, false, nil
}

// runningRecord reads a run/ entry: the running record, or (a store of the
// earlier layout) true, whose record is under key/ and was found there.
func runningRecord(tx holon.Tx, runKey string) (idemRecord, bool, error) {
	var raw json.RawMessage
	var rec idemRecord
	err := tx.Get(holon.BucketIdempotency, runKey, &raw)
	switch {
	case errors.Is(err, holon.ErrNotFound):
		return rec, false, nil
	case err != nil:
		return rec, false, err
	case string(raw) == "true":
		return rec, false, nil
	}
	if err := json.Unmarshal(raw, &rec); err != nil {
		return rec, false, fmt.Errorf("idempotency record %s: %w", runKey, err)
	}
	return rec, true, nil
}

// Record writes the key as running with the call's reservation, or done
// with the receipt and status that end the call.
func (c *claim) Record(tx holon.Tx, r *holon.Receipt) error {
	if r.Status == holon.StatusRunning {
		c.receipt = r.ID
		rec := idemRecord{State: idemRunning, Request: c.hash, Receipt: r.ID, Started: r.Created}
		return tx.Put(holon.BucketIdempotency, idemRunKey(c.scope, c.key), rec)
	}
	now := c.idem.now().UTC()
	rec := idemRecord{State: idemDone, Request: c.hash, Receipt: r.ID, Status: receiptStatus(r), Started: r.Created, Finished: &now}
	if err := tx.Put(holon.BucketIdempotency, idemKey(c.scope, c.key), rec); err != nil {
		return err
	}
	if c.receipt == "" {
		return nil
	}
	return tx.Delete(holon.BucketIdempotency, idemRunKey(c.scope, c.key))
}

// abandon marks the key interrupted when the gateway failed (or panicked)
// without a receipt to show after the key was recorded as running: the
// outcome is unknown and the key must not run again. A key this request
// never recorded is left alone (it may be another request's).
func (c *claim) abandon(ctx context.Context) {
	if c.receipt == "" {
		return
	}
	now := c.idem.now().UTC()
	_ = c.idem.store.Update(context.WithoutCancel(ctx), func(tx holon.Tx) error {
		rec, ok, err := runningRecord(tx, idemRunKey(c.scope, c.key))
		if err != nil || !ok || rec.Receipt != c.receipt {
			return err
		}
		return interrupt(tx, idemRunKey(c.scope, c.key), rec, now)
	})
}

// interrupt moves a running record to key/ as interrupted.
func interrupt(tx holon.Tx, runKey string, rec idemRecord, now time.Time) error {
	rec.State, rec.Finished = idemInterrupted, &now
	if err := tx.Put(holon.BucketIdempotency, "key/"+runKey[len("run/"):], rec); err != nil {
		return err
	}
	return tx.Delete(holon.BucketIdempotency, runKey)
}

// interruptRunning marks every key whose call was in flight when the last
// run stopped: a settled call's key is done in its settlement's own
// transaction, so a key still running was really cut short, and answers
// 409 idempotency_interrupted for the key's lifetime. It runs at
// start-up, before serving, and returns how many it marked.
func interruptRunning(ctx context.Context, store holon.Store, now time.Time) (int, error) {
	var n int
	err := store.Update(ctx, func(tx holon.Tx) error {
		n = 0
		var running []string
		err := tx.ForEach(holon.BucketIdempotency, "run/", func(k string, _ json.RawMessage) (bool, error) {
			running = append(running, k)
			return true, nil
		})
		if err != nil {
			return err
		}
		t := now.UTC()
		shared, _ := tx.(holon.SharedTx)
		for _, rk := range running {
			rec, ok, err := runningRecord(tx, rk)
			if err != nil {
				return err
			}
			if shared != nil {
				// Several gateways share the store: only the keys of
				// calls no running gateway holds were cut short.
				orphaned, err := shared.Orphaned(rec.Receipt)
				if err != nil {
					return err
				}
				if !ok || rec.Receipt == "" || !orphaned {
					continue
				}
			}
			if !ok { // the earlier layout: the record is under key/
				key := "key/" + rk[len("run/"):]
				if err := tx.Get(holon.BucketIdempotency, key, &rec); err != nil {
					return err
				}
				if rec.State != idemRunning {
					if err := tx.Delete(holon.BucketIdempotency, rk); err != nil {
						return err
					}
					continue
				}
			}
			if err := interrupt(tx, rk, rec, t); err != nil {
				return err
			}
			n++
		}
		return nil
	})
	return n, err
}
