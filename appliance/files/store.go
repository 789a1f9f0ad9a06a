// Package files keeps the files callers upload for their agents to read:
// records in the store, bytes in a directory beside it, signed download
// links, the per-account quota, the sweep of expired files, the platform's
// evaluation fixtures, and the /v0/files endpoints.
//
// It may import the domain (holon), the engine (gateway: the file links
// it hands a run), web and auth; no other room.
package files

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"holon.dev/holon"
	"holon.dev/holon/gateway"
)

// Uploaded files (gateway.md §7 "Files", spec/files.md).
//
// Where the bytes live. The bytes go to a directory beside the store
// (<db>.files/blobs/ab/<sha256>), named by their SHA-256; what the gateway
// knows about each file (owner, size, declared type, hash, expiry) is a
// small record in the store's files bucket. Not inside bbolt, because:
//   - bbolt has one writer: a 20 MB value would be written inside the
//     transaction that also settles everyone's calls, so every commit
//     around an upload would wait for it; here a commit writes a record of
//     a few hundred bytes, however large the file;
//   - bbolt never gives space back: 200 MB per account, replaced every 24
//     hours, would grow the file (and every backup) without bound, while a
//     deleted blob is disk space returned at once;
//   - opening the store reads nothing of the files, and neither does the
//     gateway's start: the sweeper finds expired files through an index
//     by expiry, and looks for stray blobs in the background.
//
// On a store several gateways share (the PostgreSQL store) the bytes
// live in the store instead, so that every gateway reads them
// (shared.go).
//
// Content addressing makes a download's check and the store's agree (the
// name is the hash the agent verifies), and stores a file uploaded twice
// once; a reference count in the store says when the last record naming
// a blob is gone. blobMu orders the two moves that could race on one
// blob: an upload putting it in place and committing its reference, and
// the sweeper removing it after the last reference went.
//
// Keys of the files bucket:
//
//	f/<id>                          the file record
//	x/<expiry, unix ns, 20 digits>/<id>   the expiry index
//	u/<account>                     the bytes of the account's live files
//	b/<sha256>                      how many records name the blob
//	o/<owner>/<expiry, 20 digits>/<id>   the owner index (files_list.go)
//
// Backups leave all of it out (backup.Write): a copy kept for months must
// not keep files the gateway promised to delete within a day.

// File limits (gateway.md §7 "Files").
const (
	// MaxFileSize bounds one upload: 20 MB.
	MaxFileSize = 20 << 20
	// MaxAccountFiles bounds the live files of one account: 200 MB.
	MaxAccountFiles = 200 << 20
	// FileTTL is how long a file lives after its upload.
	FileTTL = 24 * time.Hour
	// FileLinkTTL is how long a signed link works.
	FileLinkTTL = 15 * time.Minute
)

// PlatformFileOwner owns the platform's files (evaluation fixtures). It
// cannot be an account's handle, so no caller owns them, and only an
// evaluation run (gateway.WithEvaluation) may read them.
const PlatformFileOwner = "platform:evals"

// Error codes of uploads and downloads.
const (
	// CodeFileTooLarge: the upload is over 20 MB.
	CodeFileTooLarge = "file_too_large"
	// CodeFileQuota: the account's live files would pass 200 MB.
	CodeFileQuota = "file_quota_exceeded"
	// CodeInvalidLink: a download link whose signature does not match, or
	// that expired.
	CodeInvalidLink = "invalid_link"
)

// Record is what the store knows of one file.
type Record struct {
	ID          string    `json:"id"`
	Owner       string    `json:"owner"`
	Size        int64     `json:"size"`
	ContentType string    `json:"content_type"`
	SHA256      string    `json:"sha256"`
	Created     time.Time `json:"created"`
	// Expires is nil for a platform file, which lives until replaced.
	Expires *time.Time `json:"expires,omitempty"`
}

// Handle is the file's handle, as calls name it.
func (f *Record) Handle() string { return gateway.FileHandlePrefix + f.ID }

// Live reports whether the file may still be read at now.
func (f *Record) Live(now time.Time) bool { return f.Expires == nil || now.Before(*f.Expires) }

type usageRecord struct {
	Bytes int64 `json:"bytes"`
}

type blobRefs struct {
	Refs int64 `json:"refs"`
}

func fileKey(id string) string        { return "f/" + id }
func usageKey(account string) string  { return "u/" + account }
func blobKey(sha string) string       { return "b/" + sha }
func expiryPrefix(t time.Time) string { return fmt.Sprintf("x/%020d/", t.UnixNano()) }

// Store keeps uploaded files: records in the store, bytes in dir.
type Store struct {
	store  holon.Store
	dir    string
	now    func() time.Time
	rand   io.Reader
	log    *slog.Logger
	noSync bool
	links  *Signer
	// publicURL is the origin links point to (HOLON_PUBLIC_URL).
	publicURL string
	// perFile and perAccount are the limits (MaxFileSize, MaxAccountFiles).
	perFile, perAccount int64

	// shared keeps the bytes on a store several gateways share (nil:
	// they live under dir).
	shared holon.BlobStore
	// beforeCommit, when set (tests), runs between an upload's storing
	// of its bytes in a shared store and its record's commit.
	beforeCommit func()

	blobMu sync.Mutex
}

// Options are what a file store is opened with.
type Options struct {
	// Dir is where the bytes live.
	Dir    string
	Now    func() time.Time
	Rand   io.Reader
	Log    *slog.Logger
	NoSync bool
	// LinkKey signs download links.
	LinkKey []byte
	// PublicURL is the origin links point to (HOLON_PUBLIC_URL).
	PublicURL string
}

// Open opens the file store of store, its bytes under o.Dir.
func Open(store holon.Store, o Options) (*Store, error) {
	st := &Store{store: store, dir: o.Dir, now: o.Now, rand: o.Rand, log: o.Log, noSync: o.NoSync,
		links: &Signer{key: o.LinkKey}, publicURL: strings.TrimRight(o.PublicURL, "/"), perFile: MaxFileSize, perAccount: MaxAccountFiles}
	st.shared, _ = store.(holon.BlobStore)
	for _, d := range []string{st.dir, filepath.Join(st.dir, "blobs"), filepath.Join(st.dir, "tmp")} {
		if err := st.mkdirAll(d); err != nil {
			return nil, fmt.Errorf("files directory: %w", err)
		}
	}
	// Uploads cut short by the last stop left their partial bytes here;
	// nothing refers to them. (Usually empty: one directory read.)
	tmp, err := os.ReadDir(filepath.Join(st.dir, "tmp"))
	if err != nil {
		return nil, fmt.Errorf("files directory: %w", err)
	}
	for _, e := range tmp {
		os.Remove(filepath.Join(st.dir, "tmp", e.Name()))
	}
	return st, nil
}

func (s *Store) blobPath(sha string) string {
	return filepath.Join(s.dir, "blobs", sha[:2], sha)
}

// usage is the bytes of an account's live files.
func usage(tx holon.Tx, account string) (int64, error) {
	var u usageRecord
	err := tx.Get(holon.BucketFiles, usageKey(account), &u)
	if errors.Is(err, holon.ErrNotFound) {
		return 0, nil
	}
	return u.Bytes, err
}

// Put stores a file read from body for owner, enforcing the limits while
// it reads: it never reads more than one byte past what the owner may
// still store, so a 2 GB body is refused after 20 MB; and a body whose
// declared length (-1: unknown) is over the limit is refused before a
// byte of it is read. A platform file has no expiry and no quota.
func (s *Store) Put(ctx context.Context, owner, contentType string, declared int64, body io.Reader) (*Record, error) {
	platform := owner == PlatformFileOwner
	var used int64
	if !platform {
		if err := s.store.View(func(tx holon.Tx) error {
			var err error
			used, err = usage(tx, owner)
			return err
		}); err != nil {
			return nil, err
		}
	}
	limit := s.perFile
	if !platform {
		limit = min(limit, s.perAccount-used)
	}
	quotaFull := func(used int64) error {
		return holon.Errorf(CodeFileQuota, "%s's live files take %d of the %d bytes (200 MB) an account may keep: files are deleted 24 hours after their upload, which frees the quota",
			owner, used, s.perAccount)
	}
	tooLarge := func() error {
		return holon.Errorf(CodeFileTooLarge, "the file is larger than %d bytes (20 MB), the most one upload may hold", s.perFile)
	}
	switch {
	case declared > s.perFile:
		return nil, tooLarge()
	case limit <= 0 || declared > limit:
		return nil, quotaFull(used)
	}
	tmp, err := os.CreateTemp(filepath.Join(s.dir, "tmp"), "upload-*")
	if err != nil {
		return nil, fmt.Errorf("upload: %w", err)
	}
	placed := false
	defer func() {
		tmp.Close()
		if !placed {
			os.Remove(tmp.Name())
		}
	}()
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(tmp, h), io.LimitReader(body, limit+1))
	switch {
	case n > limit && limit == s.perFile:
		return nil, tooLarge()
	case n > limit:
		return nil, quotaFull(used)
	case err != nil:
		return nil, holon.Errorf(holon.CodeInvalidRequest, "the upload was cut short after %d bytes: %v", n, err)
	}
	if !s.noSync {
		if err := tmp.Sync(); err != nil {
			return nil, fmt.Errorf("upload: %w", err)
		}
	}
	if err := tmp.Close(); err != nil {
		return nil, fmt.Errorf("upload: %w", err)
	}
	rec := &Record{Owner: owner, Size: n, ContentType: contentType, SHA256: hexSum(h), Created: s.now().UTC()}
	if platform {
		rec.ID = PlatformFileID(contentType, rec.SHA256)
	} else if rec.ID, err = s.newID(); err != nil {
		return nil, err
	}
	if !platform {
		exp := rec.Created.Add(FileTTL)
		rec.Expires = &exp
	}

	if s.shared != nil {
		if err := s.putShared(ctx, rec, tmp.Name(), platform, quotaFull); err != nil {
			return nil, err
		}
		return rec, nil
	}
	s.blobMu.Lock()
	defer s.blobMu.Unlock()
	path := s.blobPath(rec.SHA256)
	if _, err := os.Stat(path); err == nil {
		// The same bytes are stored already: one copy serves both records.
		os.Remove(tmp.Name())
	} else {
		if err := s.mkdirAll(filepath.Dir(path)); err != nil {
			return nil, fmt.Errorf("upload: %w", err)
		}
		if err := os.Rename(tmp.Name(), path); err != nil {
			return nil, fmt.Errorf("upload: %w", err)
		}
		// The record that names the blob commits only once its name is
		// durable: else a power cut could leave a record without bytes.
		if err := s.syncDir(filepath.Dir(path)); err != nil {
			os.Remove(path)
			return nil, fmt.Errorf("upload: %w", err)
		}
	}
	placed = true
	err = s.store.Update(ctx, func(tx holon.Tx) error { return s.commit(tx, rec, platform, quotaFull) })
	if err != nil {
		s.removeUnreferencedLocked([]string{rec.SHA256})
		return nil, err
	}
	return rec, nil
}

// commit writes rec's record, its indexes, its owner's usage and its
// blob's reference count, checking the quota again where it is decided:
// uploads of one account racing each other each saw the quota before the
// other's commit.
func (s *Store) commit(tx holon.Tx, rec *Record, platform bool, quotaFull func(int64) error) error {
	if platform {
		// The same fixture stored again (every start-up): the record
		// there already serves it, and its blob keeps one reference.
		var old Record
		if err := tx.Get(holon.BucketFiles, fileKey(rec.ID), &old); err == nil {
			*rec = old
			return nil
		} else if !errors.Is(err, holon.ErrNotFound) {
			return err
		}
	} else {
		used, err := usage(tx, rec.Owner)
		if err != nil {
			return err
		}
		if used+rec.Size > s.perAccount {
			return quotaFull(used)
		}
		if err := tx.Put(holon.BucketFiles, usageKey(rec.Owner), usageRecord{Bytes: used + rec.Size}); err != nil {
			return err
		}
		if err := tx.Put(holon.BucketFiles, expiryPrefix(*rec.Expires)+rec.ID, struct{}{}); err != nil {
			return err
		}
		if err := tx.Put(holon.BucketFiles, ownerKey(rec), struct{}{}); err != nil {
			return err
		}
	}
	var refs blobRefs
	if err := tx.Get(holon.BucketFiles, blobKey(rec.SHA256), &refs); err != nil && !errors.Is(err, holon.ErrNotFound) {
		return err
	}
	refs.Refs++
	if err := tx.Put(holon.BucketFiles, blobKey(rec.SHA256), refs); err != nil {
		return err
	}
	return tx.Put(holon.BucketFiles, fileKey(rec.ID), rec)
}

func hexSum(h hash.Hash) string { return hex.EncodeToString(h.Sum(nil)) }

// newID is 96 random bits in hex: handles cannot be guessed or counted.
func (s *Store) newID() (string, error) {
	b := make([]byte, 12)
	if _, err := io.ReadFull(s.rand, b); err != nil {
		return "", fmt.Errorf("file id: %w", err)
	}
	return hex.EncodeToString(b), nil
}

// mkdirAll is os.MkdirAll whose new directories' names are durable when it
// returns: each directory it creates is synced into its parent.
func (s *Store) mkdirAll(dir string) error {
	if st, err := os.Stat(dir); err == nil && st.IsDir() {
		return nil
	}
	parent := filepath.Dir(dir)
	if parent != dir {
		if err := s.mkdirAll(parent); err != nil {
			return err
		}
	}
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
		return err
	}
	return s.syncDir(parent)
}

// syncDir fsyncs a directory (unless NoSync), making the names in it
// durable.
func (s *Store) syncDir(dir string) error {
	if s.noSync {
		return nil
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

// Lookup reads a file record; ok is false when there is none.
func (s *Store) Lookup(id string) (*Record, bool, error) {
	var rec Record
	err := s.store.View(func(tx holon.Tx) error { return tx.Get(holon.BucketFiles, fileKey(id), &rec) })
	switch {
	case errors.Is(err, holon.ErrNotFound):
		return nil, false, nil
	case err != nil:
		return nil, false, err
	}
	return &rec, true, nil
}

// validFileID reports whether id could be one newID made.
func validFileID(id string) bool {
	if len(id) != 24 {
		return false
	}
	_, err := hex.DecodeString(id)
	return err == nil && strings.ToLower(id) == id
}

// Links resolves a run's handles for the root mandate's issuer
// (gateway.FileStore). Every refusal has the same words, so that a caller
// learns nothing about a file it may not pass, not even that it exists.
func (s *Store) Links(ctx context.Context, account string, handles []string, evaluation bool) (map[string]gateway.FileLink, error) {
	now := s.now()
	out := make(map[string]gateway.FileLink, len(handles))
	err := s.store.View(func(tx holon.Tx) error {
		for _, h := range handles {
			id := strings.TrimPrefix(h, gateway.FileHandlePrefix)
			var rec Record
			err := errFileNotFound(h)
			if validFileID(id) {
				if gerr := tx.Get(holon.BucketFiles, fileKey(id), &rec); gerr == nil {
					mine := rec.Owner == account || (rec.Owner == PlatformFileOwner && evaluation)
					if mine && rec.Live(now) {
						err = nil
					}
				} else if !errors.Is(gerr, holon.ErrNotFound) {
					return gerr
				}
			}
			if err != nil {
				return err
			}
			out[h] = s.link(&rec, now)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

func errFileNotFound(handle string) error {
	return holon.Errorf(holon.CodeFileNotFound,
		"no file %s for this call: a call passes only files uploaded by the issuer of the mandate it runs under (of its root mandate when delegated), within 24 hours of their upload",
		handle)
}

// link is a signed link to rec, valid FileLinkTTL (and never past the
// file's own expiry), with an opener that reads the blob in process.
func (s *Store) link(rec *Record, now time.Time) gateway.FileLink {
	exp := now.Add(FileLinkTTL)
	if rec.Expires != nil && rec.Expires.Before(exp) {
		exp = *rec.Expires
	}
	l := gateway.FileLink{ContentType: rec.ContentType, Size: rec.Size, SHA256: rec.SHA256, Expires: exp.UTC().Truncate(time.Second)}
	if s.publicURL != "" {
		l.URL = s.publicURL + s.links.Path(rec.ID, l.Expires)
	}
	sha := rec.SHA256
	l.Open = func(ctx context.Context) (io.ReadCloser, error) { return s.open(ctx, sha) }
	return l
}

// open reads the bytes of the blob sha.
func (s *Store) open(ctx context.Context, sha string) (io.ReadSeekCloser, error) {
	if s.shared != nil {
		return s.shared.OpenBlob(ctx, sha)
	}
	return os.Open(s.blobPath(sha))
}

// Sweep deletes every file whose 24 hours have passed, frees its owner's
// quota and removes blobs no record names any more. It returns how many
// files it deleted. Expired files are found through the expiry index, in
// batches, so a sweep after a long stop does not hold the writer long.
func (s *Store) Sweep(ctx context.Context) (int, error) {
	deleted := 0
	for {
		now := s.now()
		var keys []string
		err := s.store.View(func(tx holon.Tx) error {
			end := expiryPrefix(now.Add(time.Nanosecond)) // expired: expiry <= now
			return tx.ForEach(holon.BucketFiles, "x/", func(key string, _ json.RawMessage) (bool, error) {
				if key >= end {
					return false, nil
				}
				keys = append(keys, key)
				return len(keys) < 500, nil
			})
		})
		if err != nil || len(keys) == 0 {
			return deleted, err
		}
		var gone []string
		err = s.store.Update(ctx, func(tx holon.Tx) error {
			gone = gone[:0]
			for _, key := range keys {
				id := key[strings.LastIndexByte(key, '/')+1:]
				if err := tx.Delete(holon.BucketFiles, key); err != nil {
					return err
				}
				var rec Record
				if err := tx.Get(holon.BucketFiles, fileKey(id), &rec); errors.Is(err, holon.ErrNotFound) {
					continue
				} else if err != nil {
					return err
				}
				if err := tx.Delete(holon.BucketFiles, fileKey(id)); err != nil {
					return err
				}
				if rec.Expires != nil {
					if err := tx.Delete(holon.BucketFiles, ownerKey(&rec)); err != nil {
						return err
					}
				}
				used, err := usage(tx, rec.Owner)
				if err != nil {
					return err
				}
				if used -= rec.Size; used > 0 {
					err = tx.Put(holon.BucketFiles, usageKey(rec.Owner), usageRecord{Bytes: used})
				} else {
					err = tx.Delete(holon.BucketFiles, usageKey(rec.Owner))
				}
				if err != nil {
					return err
				}
				var refs blobRefs
				if err := tx.Get(holon.BucketFiles, blobKey(rec.SHA256), &refs); err != nil && !errors.Is(err, holon.ErrNotFound) {
					return err
				}
				if refs.Refs--; refs.Refs > 0 {
					err = tx.Put(holon.BucketFiles, blobKey(rec.SHA256), refs)
				} else if err = tx.Delete(holon.BucketFiles, blobKey(rec.SHA256)); err == nil && s.shared != nil {
					err = tx.(holon.BlobTx).DeleteBlob(rec.SHA256) // with its last reference
				} else {
					gone = append(gone, rec.SHA256)
				}
				if err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return deleted, err
		}
		deleted += len(keys)
		s.blobMu.Lock()
		s.removeUnreferencedLocked(gone)
		s.blobMu.Unlock()
	}
}

// removeUnreferencedLocked removes the blobs of shas that no record names
// (blobMu held).
func (s *Store) removeUnreferencedLocked(shas []string) {
	if len(shas) == 0 {
		return
	}
	_ = s.store.View(func(tx holon.Tx) error {
		for _, sha := range shas {
			var refs blobRefs
			if err := tx.Get(holon.BucketFiles, blobKey(sha), &refs); errors.Is(err, holon.ErrNotFound) {
				if err := os.Remove(s.blobPath(sha)); err != nil && !errors.Is(err, fs.ErrNotExist) {
					s.log.Error("remove a deleted file's bytes", "err", err)
				}
			}
		}
		return nil
	})
}

// RemoveStrays removes blobs that no record names: left by a stop between
// a sweep's commit and its removal, or between an upload's rename and its
// commit. It runs in the background, never at start-up.
func (s *Store) RemoveStrays(ctx context.Context) error {
	if s.shared != nil {
		return s.removeSharedStrays(ctx)
	}
	root := filepath.Join(s.dir, "blobs")
	return filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil || ctx.Err() != nil {
			return ctx.Err()
		}
		if d.IsDir() || len(d.Name()) != 64 {
			return nil
		}
		s.blobMu.Lock()
		s.removeUnreferencedLocked([]string{d.Name()})
		s.blobMu.Unlock()
		return nil
	})
}

// PlatformFileID names a platform file by its content and declared type,
// so that storing the same fixture again (at every start-up) finds the
// file stored before instead of adding one. Knowing the name gives a
// caller nothing: only evaluation runs may read platform files.
func PlatformFileID(contentType, sha string) string {
	sum := sha256.Sum256([]byte("holon platform file\x00" + contentType + "\x00" + sha))
	return hex.EncodeToString(sum[:12])
}

// PutPlatformFile stores an evaluation fixture (no expiry, no quota),
// content-addressed: the same bytes and type give the same handle.
func (s *Store) PutPlatformFile(ctx context.Context, contentType string, body io.Reader) (string, error) {
	rec, err := s.Put(ctx, PlatformFileOwner, contentType, -1, body)
	if err != nil {
		return "", err
	}
	return rec.Handle(), nil
}

// expiresString is a link's exp parameter.
func expiresString(t time.Time) string { return strconv.FormatInt(t.Unix(), 10) }

// PutFixture stores an evaluation fixture as a platform file. A fixture
// stored by an earlier start is found by its content-derived id without
// writing a byte, so a gateway whose disk is full still starts.
func (s *Store) PutFixture(ctx context.Context, contentType string, data []byte) (string, error) {
	sum := sha256.Sum256(data)
	id := PlatformFileID(contentType, hex.EncodeToString(sum[:]))
	if rec, ok, err := s.Lookup(id); err != nil {
		return "", err
	} else if ok {
		return rec.Handle(), nil
	}
	return s.PutPlatformFile(ctx, contentType, bytes.NewReader(data))
}

// SweepEvery deletes expired files every period, first of all at
// start (files that expired while the gateway was stopped), and removes
// blobs no record names once, in the background.
func (s *Store) SweepEvery(ctx context.Context, period time.Duration) {
	if err := s.RemoveStrays(ctx); err != nil && ctx.Err() == nil {
		s.log.Error("remove stray file blobs", "err", err)
	}
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		if _, err := s.Sweep(ctx); err != nil && ctx.Err() == nil {
			s.log.Error("delete expired files", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
