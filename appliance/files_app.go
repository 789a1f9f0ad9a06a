package appliance

import (
	"context"
	"fmt"
	"io"
	"time"
)

// openFiles opens the file store beside the database, with the key that
// signs its links.
func (a *App) openFiles() error {
	key := a.cfg.deriveKey("file links")
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
	fs, err := openFileStore(a.cfg, a.store, &linkSigner{key: key})
	if err != nil {
		return err
	}
	a.files = fs
	return nil
}

// SweepFiles deletes now every file whose 24 hours have passed (the
// sweeper does so every minute) and returns how many it deleted. Their
// owners' quota is free again.
func (a *App) SweepFiles(ctx context.Context) (int, error) { return a.files.sweep(ctx) }

// PutPlatformFile stores an evaluation fixture as a platform file and
// returns its handle. Platform files do not expire and count against no
// quota; a run reads one only under gateway.WithEvaluation (the
// evaluation runner's context): an ordinary caller that passes the handle
// gets file_not_found.
func (a *App) PutPlatformFile(ctx context.Context, contentType string, body io.Reader) (string, error) {
	return a.files.putPlatformFile(ctx, contentType, body)
}

// sweepFilesEvery deletes expired files every period, first of all at
// start (files that expired while the gateway was stopped), and removes
// blobs no record names once, in the background.
func (a *App) sweepFilesEvery(ctx context.Context, period time.Duration) {
	defer close(a.filesDone)
	if err := a.files.removeStrays(ctx); err != nil && ctx.Err() == nil {
		a.log.Error("remove stray file blobs", "err", err)
	}
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		if _, err := a.files.sweep(ctx); err != nil && ctx.Err() == nil {
			a.log.Error("delete expired files", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
