package appliance

import (
	"context"
	"fmt"
	"io"

	"holon.dev/holon"
	"holon.dev/holon/appliance/files"
)

// openFiles opens the file store beside the database, with the key that
// signs its links.
func (a *App) openFiles() error {
	key := a.cfg.deriveKey("file links")
	if _, shared := a.store.(holon.BlobStore); shared && key == nil {
		var err error
		if key, err = files.SharedLinkKey(context.Background(), a.store, a.cfg.Rand); err != nil {
			return fmt.Errorf("file link key: %w", err)
		}
	}
	if key == nil {
		// Dev: links signed with a key made now die with the process,
		// which is all a link needs (15 minutes).
		key = make([]byte, 32)
		if _, err := io.ReadFull(a.cfg.Rand, key); err != nil {
			return fmt.Errorf("file link key: %w", err)
		}
		if a.cfg.Hosted {
			a.log.Warn("no HOLON_FILE_SECRET: file links are signed with a key made at start, and stop working at a restart")
		}
	}
	fs, err := files.Open(a.store, files.Options{Dir: filesDir(a.cfg), Now: a.cfg.Now, Rand: a.cfg.Rand, Log: a.cfg.Logger,
		NoSync: a.cfg.NoSync, LinkKey: key, PublicURL: a.cfg.PublicURL})
	if err != nil {
		return err
	}
	a.files = fs
	return nil
}

// SweepFiles deletes now every file whose 24 hours have passed (the
// sweeper does so every minute) and returns how many it deleted. Their
// owners' quota is free again.
func (a *App) SweepFiles(ctx context.Context) (int, error) { return a.files.Sweep(ctx) }

// PutPlatformFile stores an evaluation fixture as a platform file and
// returns its handle. Platform files do not expire and count against no
// quota; a run reads one only under gateway.WithEvaluation (the
// evaluation runner's context): an ordinary caller that passes the handle
// gets file_not_found.
func (a *App) PutPlatformFile(ctx context.Context, contentType string, body io.Reader) (string, error) {
	return a.files.PutPlatformFile(ctx, contentType, body)
}

// filesDir is where the bytes of a store's files live.
func filesDir(cfg Config) string {
	if cfg.FilesDir != "" {
		return cfg.FilesDir
	}
	return cfg.DB + ".files"
}
