package holon

import (
	"context"
	"io"
	"time"
)

// What a store several gateways share may offer besides its records
// (the PostgreSQL store offers all of it; the embedded store none, and
// its gateway keeps these in its own process and data directory).

// BlobStore is implemented by a shared store that keeps the bytes of
// uploaded files itself, so that every gateway reads a file uploaded
// through any of them. Bytes are named by their SHA-256 (hex).
type BlobStore interface {
	// PutBlob stores the size bytes read from r under sha, in a
	// transaction of its own (not the writer's group: a 20 MB upload
	// does not hold up the calls' commits), durable when it returns.
	// Bytes already stored under sha are kept and r is not read.
	PutBlob(ctx context.Context, sha string, size int64, r io.Reader) error
	// OpenBlob reads the bytes stored under sha, ErrNotFound when there
	// are none.
	OpenBlob(ctx context.Context, sha string) (io.ReadSeekCloser, error)
}

// BlobTx is implemented by the transactions of a BlobStore. A record
// naming a blob commits only where HasBlob sees it, and the last record
// naming it deletes it in the same transaction: the writer orders the
// two, across gateways.
type BlobTx interface {
	// HasBlob reports whether bytes are stored under sha.
	HasBlob(sha string) (bool, error)
	// DeleteBlob deletes the bytes stored under sha (none: no error).
	DeleteBlob(sha string) error
	// ForEachBlob calls fn with the name of every blob after after, in
	// order, until fn returns false.
	ForEachBlob(after string, fn func(sha string) (bool, error)) error
}

// SharedLimits is implemented by a shared store that keeps rate limits'
// token buckets, so that a limit holds across every gateway instead of
// once per gateway.
type SharedLimits interface {
	// TakeToken takes one token from key's bucket (burst tokens, refilled
	// at rate per second, by the store's clock) in one atomic step. It
	// returns the tokens the bucket held before the take: under 1, the
	// bucket was empty and nothing was taken.
	TakeToken(ctx context.Context, key string, rate float64, burst int) (float64, error)
	// ForgetFullBuckets deletes the buckets that are full again (idle
	// long enough that forgetting them changes nothing).
	ForgetFullBuckets(ctx context.Context) (int, error)
}

// Leader is implemented by a shared store that elects, among the
// gateways on it, the one that runs a job meant to run once (a sweep, the
// expiry of approvals, the evaluation queue).
type Leader interface {
	// Lead runs fn while this gateway leads job, until ctx ends: it
	// waits for the lead (another gateway holding it), runs fn with a
	// context that ends when the lead is lost or ctx ends; when the lead
	// is lost it waits for fn and tries again. When fn returns on its
	// own, Lead gives the lead up and returns. A leader that dies loses
	// the lead within LeadTerm.
	Lead(ctx context.Context, job string, fn func(ctx context.Context))
	// LeadTerm is how long a dead leader keeps the lead.
	LeadTerm() time.Duration
}
