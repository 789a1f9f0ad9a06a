// Package lossyfs is a FUSE filesystem for tests and drills that loses what
// a power cut would: a passthrough to a backing directory that remembers,
// per file, the writes (and size changes) not yet covered by an fsync or
// fdatasync of that file, and per directory the entries created, renamed
// or removed and not yet covered by an fsync of that directory (a rename
// is a change of the directory that gets the new name). Cut
// discards all of it (optionally keeping a random prefix of each file's
// unsynced writes, as a torn write would), so the backing directory then
// holds what a disk that honours its flushes would hold after the power
// failed.
//
// Writes reach the backing files at once (reads see them, as they would
// see the page cache); an undo record of what each overwrote is kept until
// the file is synced. An entry removed is moved aside, not deleted, until
// its directory is synced. Nothing is fsynced on the backing filesystem:
// the backing directory stands for the disk, not for something that must
// survive this machine.
//
// It mounts with go-fuse's direct mount, so it needs root (or
// CAP_SYS_ADMIN) and /dev/fuse. It is test and drill code: nothing the
// gateway serves imports it.
package lossyfs

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// disk is the lossy filesystem's server: it runs in a process of its own
// (see FS).
type disk struct {
	backing, mountpoint, aside string

	mu     sync.Mutex
	server *fuse.Server
	// files are the unsynced writes, by FUSE inode number.
	files map[uint64]*fileLog
	// entries are the directory changes not yet durable, oldest first.
	entries []*entryOp
	seq     int
	stats   Stats
}

// Stats counts what the filesystem saw and what its cuts discarded.
type Stats struct {
	// Writes and WrittenBytes are the write requests and their bytes.
	Writes, WrittenBytes int64
	// Syncs and DirSyncs are the fsyncs of files and of directories.
	Syncs, DirSyncs int64
	// Cuts is how many power cuts there were.
	Cuts int64
	// LostWrites are writes and size changes undone by a cut; TornKept
	// the unsynced ones a cut kept (a prefix of a file's unsynced writes).
	LostWrites, LostBytes, TornKept int64
	// LostEntries are directory entries created, renamed or removed that
	// a cut undid.
	LostEntries int64
}

// Available reports why a lossy filesystem cannot be mounted here (nil when
// it can be tried): it needs /dev/fuse and root.
func Available() error {
	if _, err := os.Stat("/dev/fuse"); err != nil {
		return fmt.Errorf("no /dev/fuse: %w", err)
	}
	if os.Geteuid() != 0 {
		return errors.New("mounting a FUSE filesystem without fusermount needs root")
	}
	return nil
}

// mountDisk mounts a lossy view of backing at mountpoint, served by this
// process.
func mountDisk(backing, mountpoint string) (*disk, error) {
	backing, mountpoint, err := makeDirs(backing, mountpoint)
	if err != nil {
		return nil, err
	}
	f := &disk{backing: backing, mountpoint: mountpoint, aside: backing + ".aside", files: map[uint64]*fileLog{}}
	if err := os.MkdirAll(f.aside, 0o700); err != nil {
		return nil, err
	}
	if err := f.mount(); err != nil {
		return nil, err
	}
	return f, nil
}

// makeDirs makes backing and mountpoint absolute and creates them if need
// be.
func makeDirs(backing, mountpoint string) (string, string, error) {
	backing, err := filepath.Abs(backing)
	if err != nil {
		return "", "", err
	}
	if mountpoint, err = filepath.Abs(mountpoint); err != nil {
		return "", "", err
	}
	for _, d := range []string{backing, mountpoint} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return "", "", err
		}
	}
	return backing, mountpoint, nil
}

func (f *disk) mount() error {
	var st syscall.Stat_t
	if err := syscall.Stat(f.backing, &st); err != nil {
		return fmt.Errorf("lossyfs: %w", err)
	}
	r := &fs.LoopbackRoot{Path: f.backing, Dev: uint64(st.Dev)}
	r.NewNode = func(r *fs.LoopbackRoot, _ *fs.Inode, _ string, _ *syscall.Stat_t) fs.InodeEmbedder {
		return &node{LoopbackNode: fs.LoopbackNode{RootData: r}, lfs: f}
	}
	root := r.NewNode(r, nil, "", &st)
	r.RootNode = root
	zero := time.Duration(0)
	srv, err := fs.Mount(f.mountpoint, root, &fs.Options{
		// No kernel caching of names or attributes: every lookup reaches
		// the backing directory, so what a cut restored is what is seen.
		EntryTimeout: &zero, AttrTimeout: &zero, NegativeTimeout: &zero,
		// The kernel must not drop cached pages of its own accord when
		// a file's mtime moves (each write moves it): a page of a mapped
		// file read back from the server while a write to it is on its
		// way would be stale, and bbolt maps its file. Nothing but this
		// server changes the backing files while mounted.
		MountOptions: fuse.MountOptions{DirectMount: true, FsName: "lossyfs", Name: "lossyfs", MaxBackground: 64,
			ExplicitDataCacheControl: true},
	})
	if err != nil {
		return fmt.Errorf("lossyfs: mount %s: %w", f.mountpoint, err)
	}
	f.mu.Lock()
	f.server = srv
	f.mu.Unlock()
	return nil
}

func (f *disk) counts() Stats {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.stats
}

// cut unmounts, discards what was not durable (keeping a random prefix of
// each file's unsynced writes when rng is not nil) and mounts again.
func (f *disk) cut(rng *rand.Rand) error {
	if err := f.unmount(); err != nil {
		return err
	}
	f.mu.Lock()
	err := f.discard(rng)
	f.mu.Unlock()
	if err != nil {
		return err
	}
	return f.mount()
}

// close unmounts, keeping everything written.
func (f *disk) close() error {
	err := f.unmount()
	f.mu.Lock()
	defer f.mu.Unlock()
	for ino, l := range f.files {
		l.close()
		delete(f.files, ino)
	}
	f.entries = nil
	return errors.Join(err, os.RemoveAll(f.aside))
}

func (f *disk) unmount() error {
	f.mu.Lock()
	srv := f.server
	f.server = nil
	f.mu.Unlock()
	if srv == nil {
		return nil
	}
	var err error
	for range 25 {
		if err = srv.Unmount(); err == nil {
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	// Still busy (a process of the test still has a file open): detach
	// it, so that nothing is left mounted once this process is gone.
	if derr := syscall.Unmount(f.mountpoint, syscall.MNT_DETACH); derr == nil {
		return fmt.Errorf("lossyfs: unmount %s: %w (detached instead: a file on it was still open)", f.mountpoint, err)
	}
	return fmt.Errorf("lossyfs: unmount %s: %w", f.mountpoint, err)
}

// discard undoes, newest first, every unsynced write of every file and
// then every directory change not durable, and empties the aside
// directory (what was removed durably is gone for good).
func (f *disk) discard(rng *rand.Rand) error {
	var errs []error
	for ino, l := range f.files {
		keep := 0
		if rng != nil {
			keep = rng.IntN(len(l.undo) + 1)
		}
		f.stats.TornKept += int64(keep)
		for i := len(l.undo) - 1; i >= keep; i-- {
			u := l.undo[i]
			f.stats.LostWrites++
			f.stats.LostBytes += u.n
			errs = append(errs, u.revert(l.fd))
		}
		l.close()
		delete(f.files, ino)
	}
	for i := len(f.entries) - 1; i >= 0; i-- {
		f.stats.LostEntries++
		errs = append(errs, f.entries[i].undo())
	}
	f.entries = nil
	f.stats.Cuts++
	errs = append(errs, os.RemoveAll(f.aside), os.MkdirAll(f.aside, 0o700))
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("lossyfs: cut: %w", err)
	}
	return nil
}

// setAside returns a fresh name in the aside directory, where a removed
// or replaced entry waits for its directory's fsync.
func (f *disk) setAside() string {
	f.seq++
	return filepath.Join(f.aside, fmt.Sprintf("%d", f.seq))
}

// changed records a directory change, durable once every directory of dirs
// was synced after it.
func (f *disk) changed(undo func() error, dirs ...uint64) {
	op := &entryOp{dirs: map[uint64]bool{}, undo: undo}
	for _, d := range dirs {
		op.dirs[d] = true
	}
	f.entries = append(f.entries, op)
}

// dirSynced makes durable the changes the directory ino had a part in.
func (f *disk) dirSynced(ino uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.stats.DirSyncs++
	kept := f.entries[:0]
	for _, op := range f.entries {
		delete(op.dirs, ino)
		if len(op.dirs) > 0 {
			kept = append(kept, op)
		}
	}
	clear(f.entries[len(kept):])
	f.entries = kept
}

// entryOp is a directory change not yet durable and how to undo it.
type entryOp struct {
	dirs map[uint64]bool
	undo func() error
}
