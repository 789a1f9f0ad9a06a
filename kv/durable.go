package kv

import (
	"errors"
	"os"
	"path/filepath"
)

// mkdirAllDurable is os.MkdirAll whose new directories' names are durable
// when it returns: each directory it creates is synced into its parent.
func mkdirAllDurable(dir string) error {
	if st, err := os.Stat(dir); err == nil && st.IsDir() {
		return nil
	}
	parent := filepath.Dir(dir)
	if parent != dir {
		if err := mkdirAllDurable(parent); err != nil {
			return err
		}
	}
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
		return err
	}
	return syncDir(parent)
}

// syncDir fsyncs a directory, making the names in it durable: a file
// created, renamed or removed there survives a power cut only then.
func syncDir(dir string) error {
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
