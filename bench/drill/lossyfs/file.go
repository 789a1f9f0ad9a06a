package lossyfs

import (
	"bytes"
	"context"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// fileLog is one file's writes not yet synced: what each overwrote, in the
// order they came, and a descriptor of its own to put it back with (the
// file may be closed, renamed or removed by then).
type fileLog struct {
	fd   int
	undo []undoWrite
}

func (l *fileLog) close() {
	if l.fd >= 0 {
		syscall.Close(l.fd)
		l.fd = -1
	}
}

// undoWrite puts back what one write or size change replaced: the bytes it
// overwrote (old, at off) and the file's size before it.
type undoWrite struct {
	off  int64
	old  []byte
	size int64
	n    int64 // bytes the change wrote or cut
}

func (u undoWrite) revert(fd int) error {
	if len(u.old) > 0 {
		if _, err := syscall.Pwrite(fd, u.old, u.off); err != nil {
			return err
		}
	}
	return syscall.Ftruncate(fd, u.size)
}

// before records, ahead of a change of n bytes at off (a write) or of the
// size to off (truncate, n < 0), what it will replace. fd is a descriptor
// of the file open for reading; the log keeps a duplicate of it.
func (f *disk) before(ino uint64, fd int, off, n int64) syscall.Errno {
	var st syscall.Stat_t
	if err := syscall.Fstat(fd, &st); err != nil {
		return fs.ToErrno(err)
	}
	u := undoWrite{off: off, size: st.Size, n: n}
	end := off + n
	if n < 0 { // truncate to off: what lies beyond it
		end, u.n = st.Size, st.Size-off
	}
	if end > st.Size {
		end = st.Size
	}
	if off < end {
		u.old = make([]byte, end-off)
		if _, err := syscall.Pread(fd, u.old, off); err != nil {
			return fs.ToErrno(err)
		}
	}
	l := f.files[ino]
	if l == nil {
		dup, err := syscall.Dup(fd)
		if err != nil {
			return fs.ToErrno(err)
		}
		syscall.CloseOnExec(dup)
		l = &fileLog{fd: dup}
		f.files[ino] = l
	}
	l.undo = append(l.undo, u)
	return 0
}

// synced makes a file's writes durable.
func (f *disk) synced(ino uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.stats.Syncs++
	if l := f.files[ino]; l != nil {
		l.close()
		delete(f.files, ino)
	}
}

// file is an open file of the lossy filesystem: the loopback file, with
// its writes and size changes logged first. Its descriptor must be open
// for reading too: the node opens files read-write underneath. It does not
// offer the loopback's passthrough descriptor: the kernel would then write
// to the backing file without asking.
type file struct {
	lf  *fs.LoopbackFile
	lfs *disk
	ino uint64
}

var (
	_ fs.FileReader    = (*file)(nil)
	_ fs.FileWriter    = (*file)(nil)
	_ fs.FileWritever  = (*file)(nil)
	_ fs.FileReleaser  = (*file)(nil)
	_ fs.FileFlusher   = (*file)(nil)
	_ fs.FileGetattrer = (*file)(nil)
	_ fs.FileSetattrer = (*file)(nil)
	_ fs.FileAllocater = (*file)(nil)
	_ fs.FileFsyncer   = (*file)(nil)
	_ fs.FileLseeker   = (*file)(nil)
	_ fs.FileGetlker   = (*file)(nil)
	_ fs.FileSetlker   = (*file)(nil)
	_ fs.FileSetlkwer  = (*file)(nil)
)

func (h *file) fd() int {
	fd, _ := h.lf.PassthroughFd()
	return fd
}

func (h *file) Read(ctx context.Context, buf []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	return h.lf.Read(ctx, buf, off)
}

func (h *file) Release(ctx context.Context) syscall.Errno { return h.lf.Release(ctx) }

func (h *file) Flush(ctx context.Context) syscall.Errno { return h.lf.Flush(ctx) }

func (h *file) Getattr(ctx context.Context, out *fuse.AttrOut) syscall.Errno {
	return h.lf.Getattr(ctx, out)
}

func (h *file) Lseek(ctx context.Context, off uint64, whence uint32) (uint64, syscall.Errno) {
	return h.lf.Lseek(ctx, off, whence)
}

func (h *file) Getlk(ctx context.Context, owner uint64, lk *fuse.FileLock, flags uint32, out *fuse.FileLock) syscall.Errno {
	return h.lf.Getlk(ctx, owner, lk, flags, out)
}

func (h *file) Setlk(ctx context.Context, owner uint64, lk *fuse.FileLock, flags uint32) syscall.Errno {
	return h.lf.Setlk(ctx, owner, lk, flags)
}

func (h *file) Setlkw(ctx context.Context, owner uint64, lk *fuse.FileLock, flags uint32) syscall.Errno {
	return h.lf.Setlkw(ctx, owner, lk, flags)
}

// Writev is one write of the slices joined.
func (h *file) Writev(ctx context.Context, data [][]byte, off int64) (uint32, syscall.Errno) {
	return h.Write(ctx, bytes.Join(data, nil), off)
}

// Write logs what the write replaces, then writes.
func (h *file) Write(ctx context.Context, data []byte, off int64) (uint32, syscall.Errno) {
	h.lfs.mu.Lock()
	defer h.lfs.mu.Unlock()
	if errno := h.lfs.before(h.ino, h.fd(), off, int64(len(data))); errno != 0 {
		return 0, errno
	}
	h.lfs.stats.Writes++
	h.lfs.stats.WrittenBytes += int64(len(data))
	return h.lf.Write(ctx, data, off)
}

// Setattr logs a size change, then makes it.
func (h *file) Setattr(ctx context.Context, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	if sz, ok := in.GetSize(); ok {
		h.lfs.mu.Lock()
		defer h.lfs.mu.Unlock()
		if errno := h.lfs.before(h.ino, h.fd(), int64(sz), -1); errno != 0 {
			return errno
		}
	}
	return h.lf.Setattr(ctx, in, out)
}

// Allocate logs the size before it (only plain allocation is offered: a
// punched hole is not undone).
func (h *file) Allocate(ctx context.Context, off, size uint64, mode uint32) syscall.Errno {
	if mode != 0 {
		return syscall.EOPNOTSUPP
	}
	h.lfs.mu.Lock()
	defer h.lfs.mu.Unlock()
	if errno := h.lfs.before(h.ino, h.fd(), int64(off+size), 0); errno != 0 {
		return errno
	}
	return h.lf.Allocate(ctx, off, size, mode)
}

// Fsync makes the file's writes durable (fsync and fdatasync alike).
func (h *file) Fsync(ctx context.Context, flags uint32) syscall.Errno {
	h.lfs.synced(h.ino)
	return 0
}

// dir is an open directory: the loopback's, with fsync making its entries
// durable.
type dir struct {
	inner fs.FileHandle
	lfs   *disk
	ino   uint64
}

var (
	_ fs.FileReaddirenter = (*dir)(nil)
	_ fs.FileSeekdirer    = (*dir)(nil)
	_ fs.FileReleasedirer = (*dir)(nil)
	_ fs.FileFsyncdirer   = (*dir)(nil)
)

func (d *dir) Readdirent(ctx context.Context) (*fuse.DirEntry, syscall.Errno) {
	if r, ok := d.inner.(fs.FileReaddirenter); ok {
		return r.Readdirent(ctx)
	}
	return nil, syscall.ENOTSUP
}

func (d *dir) Seekdir(ctx context.Context, off uint64) syscall.Errno {
	if s, ok := d.inner.(fs.FileSeekdirer); ok {
		return s.Seekdir(ctx, off)
	}
	return syscall.ENOTSUP
}

func (d *dir) Releasedir(ctx context.Context, flags uint32) {
	if r, ok := d.inner.(fs.FileReleasedirer); ok {
		r.Releasedir(ctx, flags)
	}
}

// Fsyncdir makes the directory's entries durable.
func (d *dir) Fsyncdir(ctx context.Context, flags uint32) syscall.Errno {
	d.lfs.dirSynced(d.ino)
	return 0
}
