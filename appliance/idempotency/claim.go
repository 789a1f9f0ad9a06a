// Package idempotency keeps the Idempotency-Keys of calls: the claim a
// call checks and records inside its own write transactions
// (gateway.Claim), the marking of calls a restart cut short, and the
// sweep of keys whose lifetime has passed.
//
// It may import the domain (holon), web (the status a receipt is answered
// with), the engine (gateway.Claim) and its canonical JSON; no other room.
package idempotency

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"holon.dev/holon"
	"holon.dev/holon/appliance/web"
	"holon.dev/holon/gateway"
	"holon.dev/holon/gateway/canonical"
)

// Idempotency-Key states.
const (
	stateRunning = "running"
	stateDone    = "done"
	// stateInterrupted: a restart (or a failure of the gateway itself) cut
	// the call short; whether it was billed is for the receipts to say.
	stateInterrupted = "interrupted"
)

// Error codes of Idempotency-Keys; their HTTP statuses are web's table.
const (
	// CodeInvalidIdempotencyKey: the Idempotency-Key header is malformed.
	CodeInvalidIdempotencyKey = "invalid_idempotency_key"
	// CodeIdempotencyInFlight: the call of this Idempotency-Key is running.
	CodeIdempotencyInFlight = "idempotency_in_flight"
	// CodeIdempotencyInterrupted: a restart interrupted the call of this
	// Idempotency-Key; its outcome is unknown.
	CodeIdempotencyInterrupted = "idempotency_interrupted"
	// CodeIdempotencyMismatch: the Idempotency-Key was used with another request.
	CodeIdempotencyMismatch = "idempotency_mismatch"
)

// maxIdempotencyKey bounds the header's length.
const maxIdempotencyKey = 255

// Record is what an Idempotency-Key recorded (gateway.md §7
// "Idempotent calls"): the request it was first used with, and the call's
// receipt and status once it finished. Never the output.
type Record struct {
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
func recordKey(scope, key string) string { return "key/" + scope + "/" + key }
func runKey(scope, key string) string    { return "run/" + scope + "/" + key }

// Keys makes the claims of Idempotency-Keys. A claim is checked
// and recorded inside the call's own write transactions (gateway.Claim):
// the key's claim with the reservation, its outcome with the settlement,
// so an idempotent call costs no commit of its own, and one transaction
// decides each claim, so of any number of concurrent requests with the
// same key exactly one runs. A finished key lives ttl: past it, the key
// is unknown again, whether or not the sweep has deleted it yet.
type Keys struct {
	store holon.Store
	now   func() time.Time
	ttl   time.Duration
	// onSweep, when set, is told how many records each of the sweep's
	// write transactions deleted (tests).
	onSweep func(deleted int)

	// The log of finished keys (log.go): mu guards logging (Open found a
	// sole writer), the index (a key's newest entry), the next sequence
	// number and the keys folded out of the log; foldMu makes one fold at
	// a time; foldNow asks the sweep's loop for a fold when the index is
	// full.
	mu      sync.Mutex
	logging bool
	index   map[string]uint64
	next    uint64
	folded  []folded
	foldMu  sync.Mutex
	foldNow chan struct{}
}

// Claim is an Idempotency-Key presented with a call: a gateway.Claim.
type Claim struct {
	keys       *Keys
	scope, key string
	// full is Key(), built once: the ledger and the records ask for it
	// several times a call.
	full string
	hash string
	// receipt is the call's receipt once the key is recorded as running
	// (set in the reservation's transaction, which nothing replays once
	// the call runs).
	receipt string
}

// ReplayError stops a call whose key already finished: the answer is the
// recorded one.
type ReplayError struct{ Rec Record }

// Error says which receipt the replay answers with.
func (e *ReplayError) Error() string { return "idempotency key already used: replay " + e.Rec.Receipt }

func validKey(k string) bool {
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

// CallRequest is a POST /v0/calls request as its Idempotency-Key binds
// it: the body's members, with the mandate the call runs under and
// max_cost as its decimal string ("" when the body has none).
type CallRequest struct {
	Mandate, Agent, Capability, Approval string
	Input                                json.RawMessage
	MaxCost                              string
}

// AppendCanonical appends the request in canonical JSON (RFC 8785): the
// bytes canonical.JSON gives for json.Marshal's encoding of the call's
// body (v0's callBody, whose omitempty members are left out when empty),
// written without either. Members go in the scheme's order of their names.
func (r CallRequest) AppendCanonical(dst []byte) ([]byte, error) {
	dst = append(dst, '{')
	member := func(name string) {
		if len(dst) > 1 {
			dst = append(dst, ',')
		}
		dst = append(dst, '"')
		dst = append(dst, name...)
		dst = append(dst, '"', ':')
	}
	if r.Agent != "" {
		member("agent")
		dst = canonical.AppendString(dst, r.Agent)
	}
	if r.Approval != "" {
		member("approval")
		dst = canonical.AppendString(dst, r.Approval)
	}
	if r.Capability != "" {
		member("capability")
		dst = canonical.AppendString(dst, r.Capability)
	}
	member("input")
	if r.Input == nil {
		dst = append(dst, "null"...)
	} else {
		var err error
		if dst, err = canonical.AppendJSON(dst, r.Input); err != nil {
			return nil, err
		}
	}
	member("mandate")
	dst = canonical.AppendString(dst, r.Mandate)
	if r.MaxCost != "" {
		member("max_cost")
		dst = canonical.AppendString(dst, r.MaxCost)
	}
	return append(dst, '}'), nil
}

// requestHash is the SHA-256 of a call request in canonical JSON (RFC
// 8785): the same call sent with other white space or key order is the
// same request.
func requestHash(body any) (string, error) {
	var c []byte
	var err error
	if r, ok := body.(CallRequest); ok {
		var buf [512]byte
		c, err = r.AppendCanonical(buf[:0])
	} else {
		var b []byte
		if b, err = json.Marshal(body); err != nil {
			return "", err
		}
		c, err = canonical.JSON(b)
	}
	if err != nil {
		return "", holon.Errorf(holon.CodeInvalidRequest, "body: %v", err)
	}
	sum := sha256.Sum256(c)
	return hex.EncodeToString(sum[:]), nil
}

// Claim presents an Idempotency-Key for a request; the call checks and
// records it (gateway.CallInput.Claim).
func (d *Keys) Claim(scope, key string, body any) (*Claim, error) {
	if !validKey(key) {
		return nil, holon.Errorf(CodeInvalidIdempotencyKey, "Idempotency-Key must be 1 to %d visible ASCII characters, such as a UUID", maxIdempotencyKey)
	}
	hash, err := requestHash(body)
	if err != nil {
		return nil, err
	}
	return &Claim{keys: d, scope: scope, key: key, full: scope + "/" + key, hash: hash}, nil
}

// Check lets a new key through, and a key whose lifetime has passed. A
// known key with another request is refused (422 idempotency_mismatch), a
// running one answers 409, one whose call a restart cut short answers 409
// idempotency_interrupted, and a finished one stops the call with a
// *ReplayError.
func (c *Claim) Check(tx holon.Tx) error {
	rec, found, err := c.lookup(tx)
	switch {
	case err != nil:
		return err
	case !found:
		return nil
	case rec.Request != c.hash:
		return holon.Errorf(CodeIdempotencyMismatch, "Idempotency-Key %q was used with another request: send this one with a new key", c.key)
	case rec.State == stateRunning:
		return holon.Errorf(CodeIdempotencyInFlight, "the call of Idempotency-Key %q is still running: wait for it, then re-send to get its receipt", c.key)
	case rec.State == stateInterrupted:
		return holon.Errorf(CodeIdempotencyInterrupted, "the call of Idempotency-Key %q was interrupted (a restart) before it settled: check GET /v0/receipts, then send it again with a new key if it did not happen", c.key)
	}
	return &ReplayError{Rec: rec}
}

// Key is the key with its scope: a gateway.Claim.
func (c *Claim) Key() string {
	if c.full != "" {
		return c.full
	}
	return c.scope + "/" + c.key
}

// Running refuses the key while another call of it runs in memory, as
// Check refuses a running record: 422 for another request, else 409.
func (c *Claim) Running(other gateway.Claim) error {
	if o, ok := other.(*Claim); ok && o.hash != c.hash {
		return holon.Errorf(CodeIdempotencyMismatch, "Idempotency-Key %q was used with another request: send this one with a new key", c.key)
	}
	return holon.Errorf(CodeIdempotencyInFlight, "the call of Idempotency-Key %q is still running: wait for it, then re-send to get its receipt", c.key)
}

// lookup reads the key's record: finished in the log (log.go), finished
// or interrupted under key/, running under run/. A finished record past
// its lifetime is absent: the key runs as a new one, and its new record
// replaces the old.
func (c *Claim) lookup(tx holon.Tx) (Record, bool, error) {
	if rec, ok, err := c.lookupLog(tx); ok || err != nil {
		return rec, ok, err
	}
	var rec Record
	err := tx.Get(holon.BucketIdempotency, recordKey(c.scope, c.key), &rec)
	if err == nil && !c.keys.expired(rec, c.keys.now()) {
		return rec, true, nil
	}
	if err != nil && !errors.Is(err, holon.ErrNotFound) {
		return rec, false, err
	}
	rec = Record{}
	if rec, ok, err := runningRecord(tx, runKey(c.scope, c.key)); ok || err != nil {
		return rec, ok, err
	}
	return rec, false, nil
}

// runningRecord reads a run/ entry: the running record, or (a store of the
// earlier layout) true, whose record is under key/ and was found there.
func runningRecord(tx holon.Tx, runKey string) (Record, bool, error) {
	var raw json.RawMessage
	var rec Record
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
// with the receipt and status that end the call: appended to the log of
// finished keys on a store only this process writes, else under key/.
func (c *Claim) Record(tx holon.Tx, r *holon.Receipt) error {
	if r.Status == holon.StatusRunning {
		c.receipt = r.ID
		rec := Record{State: stateRunning, Request: c.hash, Receipt: r.ID, Started: r.Created}
		return tx.Put(holon.BucketIdempotency, runKey(c.scope, c.key), rec)
	}
	now := c.keys.now().UTC()
	rec := Record{State: stateDone, Request: c.hash, Receipt: r.ID, Status: web.ReceiptStatus(r), Started: r.Created, Finished: &now}
	if seq, ok := c.keys.appendLog(c.Key()); ok {
		if err := tx.Put(holon.BucketIdempotency, logKey(seq), logEntry{Key: c.Key(), Record: rec}); err != nil {
			return err
		}
	} else if err := tx.Put(holon.BucketIdempotency, recordKey(c.scope, c.key), rec); err != nil {
		return err
	}
	if c.receipt == "" {
		return nil
	}
	return tx.Delete(holon.BucketIdempotency, runKey(c.scope, c.key))
}

// Abandon marks the key interrupted when the gateway failed (or panicked)
// without a receipt to show after the key was recorded as running: the
// outcome is unknown and the key must not run again. A key this request
// never recorded is left alone (it may be another request's).
func (c *Claim) Abandon(ctx context.Context) {
	if c.receipt == "" {
		return
	}
	now := c.keys.now().UTC()
	_ = c.keys.store.Update(context.WithoutCancel(ctx), func(tx holon.Tx) error {
		rec, ok, err := runningRecord(tx, runKey(c.scope, c.key))
		if err != nil || !ok || rec.Receipt != c.receipt {
			return err
		}
		return interrupt(tx, runKey(c.scope, c.key), rec, now)
	})
}

// interrupt moves a running record to key/ as interrupted.
func interrupt(tx holon.Tx, runKey string, rec Record, now time.Time) error {
	rec.State, rec.Finished = stateInterrupted, &now
	if err := tx.Put(holon.BucketIdempotency, "key/"+runKey[len("run/"):], rec); err != nil {
		return err
	}
	return tx.Delete(holon.BucketIdempotency, runKey)
}

// InterruptRunning marks every key whose call was in flight when the last
// run stopped: a settled call's key is done in its settlement's own
// transaction, so a key still running was really cut short, and answers
// 409 idempotency_interrupted for the key's lifetime. It runs at
// start-up, before serving, and returns how many it marked.
func InterruptRunning(ctx context.Context, store holon.Store, now time.Time) (int, error) {
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
				if rec.State != stateRunning {
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

// New returns the Idempotency-Keys kept in store, each living ttl after
// its call ended.
func New(store holon.Store, now func() time.Time, ttl time.Duration) *Keys {
	return &Keys{store: store, now: now, ttl: ttl, foldNow: make(chan struct{}, 1)}
}
