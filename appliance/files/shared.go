package files

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"holon.dev/holon"
)

// Files on a store several gateways share (holon.BlobStore: the
// PostgreSQL store). The bytes go into the store itself, not under one
// gateway's directory, so that a file uploaded through one gateway is read
// through any other: by a signed link, and by a call that names its
// handle. The guarantees are those of the directory:
//   - the bytes are durable before the record naming them commits:
//     PutBlob commits them in a transaction of their own first;
//   - a record commits only where its blob is there (HasBlob, in the
//     record's transaction), and the last record naming a blob deletes it
//     in the same transaction (Sweep): the store's writer orders the two
//     across gateways, as blobMu orders them within one. An upload whose
//     blob a sweep deleted between its PutBlob and its commit stores the
//     bytes again.

// errBlobGone: the blob an upload stored was deleted before its record
// committed (a sweep removed the last file naming the same bytes).
var errBlobGone = errors.New("the file's bytes were deleted before its record committed")

// putShared stores the bytes of the upload at tmp in the store, then
// commits rec.
func (s *Store) putShared(ctx context.Context, rec *Record, tmp string, platform bool, quotaFull func(int64) error) error {
	for attempt := 1; ; attempt++ {
		if err := s.putBlob(ctx, rec, tmp); err != nil {
			return fmt.Errorf("upload: %w", err)
		}
		if s.beforeCommit != nil {
			s.beforeCommit()
		}
		err := s.store.Update(ctx, func(tx holon.Tx) error {
			if ok, err := tx.(holon.BlobTx).HasBlob(rec.SHA256); err != nil {
				return err
			} else if !ok {
				return errBlobGone
			}
			return s.commit(tx, rec, platform, quotaFull)
		})
		switch {
		case errors.Is(err, errBlobGone) && attempt < 3:
			continue
		case err != nil:
			s.dropUnreferenced(ctx, []string{rec.SHA256})
			return err
		}
		return nil
	}
}

func (s *Store) putBlob(ctx context.Context, rec *Record, tmp string) error {
	f, err := os.Open(tmp)
	if err != nil {
		return err
	}
	defer f.Close()
	return s.shared.PutBlob(ctx, rec.SHA256, rec.Size, f)
}

// dropUnreferenced deletes the blobs of shas that no record names.
func (s *Store) dropUnreferenced(ctx context.Context, shas []string) {
	if len(shas) == 0 {
		return
	}
	err := s.store.Update(ctx, func(tx holon.Tx) error {
		for _, sha := range shas {
			var refs blobRefs
			if err := tx.Get(holon.BucketFiles, blobKey(sha), &refs); errors.Is(err, holon.ErrNotFound) {
				if err := tx.(holon.BlobTx).DeleteBlob(sha); err != nil {
					return err
				}
			} else if err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil && ctx.Err() == nil {
		s.log.Error("remove a deleted file's bytes", "err", err)
	}
}

// removeSharedStrays deletes the blobs no record names, a page at a time:
// left by a gateway that stopped between an upload's PutBlob and its
// commit.
func (s *Store) removeSharedStrays(ctx context.Context) error {
	after := ""
	for ctx.Err() == nil {
		var stray []string
		last := ""
		n := 0
		err := s.store.View(func(tx holon.Tx) error {
			return tx.(holon.BlobTx).ForEachBlob(after, func(sha string) (bool, error) {
				last, n = sha, n+1
				var refs blobRefs
				if err := tx.Get(holon.BucketFiles, blobKey(sha), &refs); errors.Is(err, holon.ErrNotFound) {
					stray = append(stray, sha)
				} else if err != nil {
					return false, err
				}
				return n < 500, nil
			})
		})
		if err != nil {
			return err
		}
		s.dropUnreferenced(ctx, stray)
		if n < 500 {
			return nil
		}
		after = last
	}
	return ctx.Err()
}

// linkKeyKey holds the key that signs links on a shared store whose
// gateways were given no HOLON_FILE_SECRET (dev).
const linkKeyKey = "k/links"

// SharedLinkKey returns the key the gateways of a shared store sign links
// with when none was configured: made by the first of them and kept in
// the store (holon.StoredKey), so that a link one gateway signed opens on
// every other.
func SharedLinkKey(ctx context.Context, store holon.Store, rand io.Reader) ([]byte, error) {
	return holon.StoredKey(ctx, store, holon.BucketFiles, linkKeyKey, rand)
}
