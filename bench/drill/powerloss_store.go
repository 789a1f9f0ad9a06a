package drill

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"

	bolt "go.etcd.io/bbolt"

	"holon.dev/holon"
	"holon.dev/holon/backup"
	"holon.dev/holon/kv"
)

// fileRecord is the part of an uploaded file's record the drill checks.
type fileRecord struct {
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"`
}

// readFileRecords reads the uploaded files' records of a stopped
// gateway's store, by handle.
func readFileRecords(path string) (map[string]fileRecord, error) {
	s, err := kv.OpenReadOnly(path)
	if err != nil {
		return nil, err
	}
	defer s.Close()
	out := map[string]fileRecord{}
	err = s.View(func(tx *kv.Tx) error {
		return tx.ForEachAfter(holon.BucketFiles, "f/", "", func(key string, v json.RawMessage) (bool, error) {
			var r fileRecord
			if err := json.Unmarshal(v, &r); err != nil {
				return false, fmt.Errorf("file record %s: %w", key, err)
			}
			out[strings.TrimPrefix(key, "f/")] = r
			return true, nil
		})
	})
	return out, err
}

// boltCheck runs bbolt's own consistency check (every page reachable
// once, no page both free and in use) on a store no process holds.
func boltCheck(d *drill, path, where string) {
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true, Timeout: 2 * time.Second})
	if err != nil {
		d.check("bbolt's consistency check passes", false, "%s: open %s: %v", where, path, err)
		return
	}
	defer db.Close()
	var errs []error
	err = db.View(func(tx *bolt.Tx) error {
		for e := range tx.Check() {
			errs = append(errs, e)
		}
		return nil
	})
	errs = append(errs, err)
	err = errors.Join(errs...)
	d.check("bbolt's consistency check passes", err == nil, "%s: %v", where, err)
}

// checkBackupFile reads a backup file through and checks its header,
// rows and trailer.
func checkBackupFile(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = backup.Check(f)
	return err
}

// syncDirOf fsyncs a directory.
func syncDirOf(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// execCommand is exec.CommandContext, SIGKILLed when ctx ends.
func execCommand(ctx context.Context, name string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGKILL) }
	return cmd
}

func jsonUnmarshal(b []byte, v any) error { return json.Unmarshal(b, v) }
