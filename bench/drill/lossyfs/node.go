package lossyfs

import (
	"context"
	"os"
	"path/filepath"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// node is a file or directory of the lossy filesystem: the loopback node,
// with every change of a directory's entries recorded (and removals set
// aside) and every file opened through a logging handle.
type node struct {
	fs.LoopbackNode
	lfs *disk
}

var (
	_ fs.NodeCreater        = (*node)(nil)
	_ fs.NodeMkdirer        = (*node)(nil)
	_ fs.NodeMknoder        = (*node)(nil)
	_ fs.NodeSymlinker      = (*node)(nil)
	_ fs.NodeLinker         = (*node)(nil)
	_ fs.NodeUnlinker       = (*node)(nil)
	_ fs.NodeRmdirer        = (*node)(nil)
	_ fs.NodeRenamer        = (*node)(nil)
	_ fs.NodeOpener         = (*node)(nil)
	_ fs.NodeOpendirHandler = (*node)(nil)
	_ fs.NodeSetattrer      = (*node)(nil)
	_ fs.NodeFsyncer        = (*node)(nil)
	_ fs.NodeCopyFileRanger = (*node)(nil)
)

// path is the node's path in the backing directory.
func (n *node) path() string {
	return filepath.Join(n.RootData.Path, n.Path(n.Root()))
}

func (n *node) ino() uint64 { return n.StableAttr().Ino }

// created records a new entry name in n, undone by removing it.
func (n *node) created(name string, dir bool) {
	p := filepath.Join(n.path(), name)
	n.lfs.changed(func() error {
		if dir {
			return os.RemoveAll(p)
		}
		return ignoreMissing(os.Remove(p))
	}, n.ino())
}

func ignoreMissing(err error) error {
	if os.IsNotExist(err) {
		return nil
	}
	return err
}

// rw opens for reading and writing what is opened for writing: a write's
// undo record reads what it replaces.
func rw(flags uint32) uint32 {
	if flags&syscall.O_ACCMODE == syscall.O_WRONLY {
		flags = flags&^syscall.O_ACCMODE | syscall.O_RDWR
	}
	return flags
}

func (n *node) Create(ctx context.Context, name string, flags, mode uint32, out *fuse.EntryOut) (*fs.Inode, fs.FileHandle, uint32, syscall.Errno) {
	n.lfs.mu.Lock()
	defer n.lfs.mu.Unlock()
	p := filepath.Join(n.path(), name)
	_, err := os.Lstat(p)
	existed := err == nil
	if existed && flags&syscall.O_TRUNC != 0 {
		// Opened as created over an existing file: the truncation is a
		// write of that file, logged like one.
		if errno := n.truncateAt(p, 0); errno != 0 {
			return nil, nil, 0, errno
		}
	}
	ch, fh, fl, errno := n.LoopbackNode.Create(ctx, name, rw(flags)&^syscall.O_TRUNC, mode, out)
	if errno != 0 {
		return nil, nil, 0, errno
	}
	if !existed {
		n.created(name, false)
	}
	return ch, &file{lf: fh.(*fs.LoopbackFile), lfs: n.lfs, ino: ch.StableAttr().Ino}, fl, 0
}

// truncateAt truncates the backing file p to size, logged (lfs.mu held).
func (n *node) truncateAt(p string, size int64) syscall.Errno {
	fd, err := syscall.Open(p, syscall.O_RDWR|syscall.O_CLOEXEC, 0)
	if err != nil {
		return fs.ToErrno(err)
	}
	defer syscall.Close(fd)
	var st syscall.Stat_t
	if err := syscall.Fstat(fd, &st); err != nil {
		return fs.ToErrno(err)
	}
	if errno := n.lfs.before(n.lfsIno(&st), fd, size, -1); errno != 0 {
		return errno
	}
	return fs.ToErrno(syscall.Ftruncate(fd, size))
}

// lfsIno is the FUSE inode number the loopback gives a backing file.
func (n *node) lfsIno(st *syscall.Stat_t) uint64 {
	swapped := (uint64(st.Dev) << 32) | (uint64(st.Dev) >> 32)
	swappedRootDev := (n.RootData.Dev << 32) | (n.RootData.Dev >> 32)
	return (swapped ^ swappedRootDev) ^ st.Ino
}

func (n *node) Open(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	if flags&syscall.O_TRUNC != 0 && flags&syscall.O_ACCMODE != syscall.O_RDONLY {
		n.lfs.mu.Lock()
		errno := n.truncateAt(n.path(), 0)
		n.lfs.mu.Unlock()
		if errno != 0 {
			return nil, 0, errno
		}
	}
	fh, fl, errno := n.LoopbackNode.Open(ctx, rw(flags)&^syscall.O_TRUNC)
	if errno != 0 {
		return nil, 0, errno
	}
	return &file{lf: fh.(*fs.LoopbackFile), lfs: n.lfs, ino: n.ino()}, fl, 0
}

func (n *node) OpendirHandle(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	fh, fl, errno := n.LoopbackNode.OpendirHandle(ctx, flags)
	if errno != 0 {
		return nil, 0, errno
	}
	return &dir{inner: fh, lfs: n.lfs, ino: n.ino()}, fl, 0
}

// Setattr logs a size change made by path (truncate(2)) or through a
// handle, then makes the change.
func (n *node) Setattr(ctx context.Context, f fs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	if h, ok := f.(*file); ok {
		if errno := h.Setattr(ctx, in, out); errno != 0 {
			return errno
		}
		return n.LoopbackNode.Getattr(ctx, h.lf, out)
	}
	if sz, ok := in.GetSize(); ok {
		n.lfs.mu.Lock()
		errno := n.truncateAt(n.path(), int64(sz))
		n.lfs.mu.Unlock()
		if errno != 0 {
			return errno
		}
	}
	return n.LoopbackNode.Setattr(ctx, nil, in, out)
}

// Fsync makes a file's writes durable.
func (n *node) Fsync(ctx context.Context, f fs.FileHandle, flags uint32) syscall.Errno {
	n.lfs.synced(n.ino())
	return 0
}

// CopyFileRange is refused: the kernel falls back to reads and writes,
// which are logged.
func (n *node) CopyFileRange(ctx context.Context, fhIn fs.FileHandle, offIn uint64, out *fs.Inode, fhOut fs.FileHandle, offOut uint64, length uint64, flags uint64) (uint32, syscall.Errno) {
	return 0, syscall.EOPNOTSUPP
}

func (n *node) Mkdir(ctx context.Context, name string, mode uint32, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	n.lfs.mu.Lock()
	defer n.lfs.mu.Unlock()
	ch, errno := n.LoopbackNode.Mkdir(ctx, name, mode, out)
	if errno == 0 {
		n.created(name, true)
	}
	return ch, errno
}

func (n *node) Mknod(ctx context.Context, name string, mode, rdev uint32, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	n.lfs.mu.Lock()
	defer n.lfs.mu.Unlock()
	ch, errno := n.LoopbackNode.Mknod(ctx, name, mode, rdev, out)
	if errno == 0 {
		n.created(name, false)
	}
	return ch, errno
}

func (n *node) Symlink(ctx context.Context, target, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	n.lfs.mu.Lock()
	defer n.lfs.mu.Unlock()
	ch, errno := n.LoopbackNode.Symlink(ctx, target, name, out)
	if errno == 0 {
		n.created(name, false)
	}
	return ch, errno
}

func (n *node) Link(ctx context.Context, target fs.InodeEmbedder, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	n.lfs.mu.Lock()
	defer n.lfs.mu.Unlock()
	ch, errno := n.LoopbackNode.Link(ctx, target, name, out)
	if errno == 0 {
		n.created(name, false)
	}
	return ch, errno
}

// setAside moves the backing entry p aside (lfs.mu held) and returns where
// it went.
func (n *node) setAside(p string) (string, syscall.Errno) {
	to := n.lfs.setAside()
	if err := os.Rename(p, to); err != nil {
		return "", fs.ToErrno(err)
	}
	return to, 0
}

func (n *node) Unlink(ctx context.Context, name string) syscall.Errno {
	n.lfs.mu.Lock()
	defer n.lfs.mu.Unlock()
	p := filepath.Join(n.path(), name)
	st, err := os.Lstat(p)
	if err != nil {
		return fs.ToErrno(err)
	}
	if st.IsDir() {
		return syscall.EISDIR
	}
	to, errno := n.setAside(p)
	if errno != 0 {
		return errno
	}
	n.lfs.changed(func() error { return os.Rename(to, p) }, n.ino())
	return 0
}

func (n *node) Rmdir(ctx context.Context, name string) syscall.Errno {
	n.lfs.mu.Lock()
	defer n.lfs.mu.Unlock()
	p := filepath.Join(n.path(), name)
	if _, err := os.Lstat(p); err != nil {
		return fs.ToErrno(err)
	}
	if !emptyDir(p) {
		return syscall.ENOTEMPTY
	}
	to, errno := n.setAside(p)
	if errno != 0 {
		return errno
	}
	n.lfs.changed(func() error { return os.Rename(to, p) }, n.ino())
	return 0
}

// renameNoReplace is RENAME_NOREPLACE; RENAME_EXCHANGE and whiteouts are
// not offered.
const renameNoReplace = 1

// Rename renames, and records it as durable once the directory of the new
// name is synced (as on the journaling filesystems: the rename is one
// transaction, and the directory to sync is the one that holds the name).
func (n *node) Rename(ctx context.Context, name string, newParent fs.InodeEmbedder, newName string, flags uint32) syscall.Errno {
	np, ok := newParent.(*node)
	if !ok {
		return syscall.EXDEV
	}
	if flags&^renameNoReplace != 0 {
		return syscall.EINVAL
	}
	n.lfs.mu.Lock()
	defer n.lfs.mu.Unlock()
	from, to := filepath.Join(n.path(), name), filepath.Join(np.path(), newName)
	src, err := os.Lstat(from)
	if err != nil {
		return fs.ToErrno(err)
	}
	displaced := ""
	if dst, err := os.Lstat(to); err == nil {
		switch {
		case flags&renameNoReplace != 0:
			return syscall.EEXIST
		case os.SameFile(src, dst):
			return 0
		case dst.IsDir() != src.IsDir():
			if dst.IsDir() {
				return syscall.EISDIR
			}
			return syscall.ENOTDIR
		case dst.IsDir() && !emptyDir(to):
			return syscall.ENOTEMPTY
		}
		var errno syscall.Errno
		if displaced, errno = n.setAside(to); errno != 0 {
			return errno
		}
	}
	if err := os.Rename(from, to); err != nil {
		if displaced != "" {
			os.Rename(displaced, to)
		}
		return fs.ToErrno(err)
	}
	n.lfs.changed(func() error {
		if err := os.Rename(to, from); err != nil {
			return err
		}
		if displaced != "" {
			return os.Rename(displaced, to)
		}
		return nil
	}, np.ino())
	return 0
}

func emptyDir(p string) bool {
	d, err := os.Open(p)
	if err != nil {
		return false
	}
	defer d.Close()
	names, _ := d.Readdirnames(1)
	return len(names) == 0
}
