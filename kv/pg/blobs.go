package pg

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/jackc/pgx/v5"

	"holon.dev/holon"
)

// The bytes of uploaded files (holon.BlobStore), in blobs and
// blob_chunks: every gateway on the database reads what any of them
// stored.

var (
	_ holon.BlobStore = (*Store)(nil)
	_ holon.BlobTx    = (*Tx)(nil)
)

// ChunkSize is the most bytes one row of blob_chunks holds.
const ChunkSize = 1 << 20

// PutBlob stores the size bytes of r under sha in one transaction of its
// own, committed (durable) when it returns; bytes already stored under sha
// are kept and r is not read.
func (s *Store) PutBlob(ctx context.Context, sha string, size int64, r io.Reader) error {
	err := pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{}, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `INSERT INTO blobs (sha256, size) VALUES ($1, $2) ON CONFLICT (sha256) DO NOTHING`, sha, size)
		if err != nil || tag.RowsAffected() == 0 {
			return err // stored already (or an error)
		}
		buf := make([]byte, ChunkSize)
		var total int64
		for n := 0; ; n++ {
			k, rerr := io.ReadFull(r, buf)
			if k > 0 {
				if _, err := tx.Exec(ctx, `INSERT INTO blob_chunks (sha256, n, data) VALUES ($1, $2, $3)`, sha, n, buf[:k]); err != nil {
					return err
				}
				total += int64(k)
			}
			if errors.Is(rerr, io.EOF) || errors.Is(rerr, io.ErrUnexpectedEOF) {
				break
			}
			if rerr != nil {
				return rerr
			}
		}
		if total != size {
			return fmt.Errorf("blob %s: read %d bytes, want %d", sha, total, size)
		}
		return nil
	})
	return unavailable(err)
}

// OpenBlob reads the bytes stored under sha, a chunk at a time.
func (s *Store) OpenBlob(ctx context.Context, sha string) (io.ReadSeekCloser, error) {
	b := &blobReader{ctx: ctx, s: s, sha: sha, chunk: -1}
	err := s.pool.QueryRow(ctx, `SELECT size FROM blobs WHERE sha256 = $1`, sha).Scan(&b.size)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, holon.ErrNotFound
	}
	if err != nil {
		return nil, unavailable(err)
	}
	return b, nil
}

// blobReader reads a blob's chunks as they are needed.
type blobReader struct {
	ctx   context.Context
	s     *Store
	sha   string
	size  int64
	off   int64
	chunk int64 // the chunk in buf, -1 for none
	buf   []byte
}

func (b *blobReader) Read(p []byte) (int, error) {
	if b.off >= b.size {
		return 0, io.EOF
	}
	n := b.off / ChunkSize
	if n != b.chunk {
		b.buf = b.buf[:0]
		err := b.s.pool.QueryRow(b.ctx, `SELECT data FROM blob_chunks WHERE sha256 = $1 AND n = $2`, b.sha, n).Scan(&b.buf)
		if errors.Is(err, pgx.ErrNoRows) {
			return 0, fmt.Errorf("file bytes %s: chunk %d is gone (the file was deleted)", b.sha, n)
		}
		if err != nil {
			return 0, unavailable(err)
		}
		b.chunk = n
	}
	i := b.off - n*ChunkSize
	if i >= int64(len(b.buf)) {
		return 0, io.ErrUnexpectedEOF
	}
	k := copy(p, b.buf[i:])
	b.off += int64(k)
	return k, nil
}

func (b *blobReader) Seek(offset int64, whence int) (int64, error) {
	switch whence {
	case io.SeekStart:
	case io.SeekCurrent:
		offset += b.off
	case io.SeekEnd:
		offset += b.size
	default:
		return 0, errors.New("seek: bad whence")
	}
	if offset < 0 {
		return 0, errors.New("seek before the start")
	}
	b.off = offset
	return offset, nil
}

func (b *blobReader) Close() error { return nil }

// HasBlob reports whether bytes are stored under sha.
func (t *Tx) HasBlob(sha string) (bool, error) {
	var ok bool
	err := t.one(`SELECT EXISTS (SELECT 1 FROM blobs WHERE sha256 = $1)`, []any{sha}, &ok)
	return ok, err
}

// DeleteBlob deletes the bytes stored under sha, with their chunks.
func (t *Tx) DeleteBlob(sha string) error {
	return t.execFree(`DELETE FROM blobs WHERE sha256 = $1`, sha)
}

// ForEachBlob calls fn with the name of every blob after after, in
// order, until fn returns false.
func (t *Tx) ForEachBlob(after string, fn func(sha string) (bool, error)) error {
	for {
		var page []string
		err := t.all(`SELECT sha256 FROM blobs WHERE sha256 > $1 ORDER BY sha256 LIMIT $2`, []any{after, pageSize}, func(rows pgx.Rows) error {
			var sha string
			if err := rows.Scan(&sha); err != nil {
				return err
			}
			page = append(page, sha)
			return nil
		})
		if err != nil {
			return err
		}
		for _, sha := range page {
			more, err := fn(sha)
			if err != nil || !more {
				return err
			}
		}
		if len(page) < pageSize {
			return nil
		}
		after = page[len(page)-1]
	}
}
