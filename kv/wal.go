package kv

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	bolt "go.etcd.io/bbolt"
)

// The store's write-ahead log.
//
// bbolt makes a commit durable with two fdatasyncs of its file (its pages,
// then its meta page), each over the scattered pages the commit touched.
// The store does better with a log of its own: the writer appends what a
// batch's transaction changed (redo.go) to the log and fdatasyncs that one
// sequential write, while bbolt commits the batch without a sync. Readers
// see a commit only once its record is synced (the store's snapshot,
// store.go), so every read still sees only what is durable.
//
// A checkpoint makes bbolt's file alone hold a commit T: right after T, the
// writer opens a read transaction on T (the pin) and switches the log to a
// new segment; the checkpointer goroutine then fdatasyncs the file (every
// page of T is written by then), saves T's meta page (read back from the
// file just after T committed) in the checkpoint file, and only then lets
// go of the previous checkpoint's pin and of the segments before T. bbolt
// never reuses a page that an open read transaction can reach, so the pages
// of the last durable checkpoint stay as they were on disk while later
// commits are written without a sync; its meta page, which bbolt overwrites
// two commits later, is in the checkpoint file.
//
// Open recovers: it writes the checkpoint's meta page over both of bbolt's
// (after a power cut they may name pages the disk never got), so bbolt
// opens on T exactly, and replays the records after T, in order, up to the
// first that is torn or missing (the tail a cut left unsynced). A clean
// Close syncs the file and removes the log: what it leaves is a plain
// bbolt file, which any reader (and an older gateway) opens as before.
// While the log may hold commits the file lacks, the file says so in its
// format (FileFormatLogging, written and synced before the log's first
// record): a gateway from before the log refuses it after a crash
// instead of opening it without them.
//
// A read transaction holds bbolt's map of the file: bbolt cannot map a
// larger file while one is open, so the store maps walMapBytes from the
// start, and stops logging (going back to bbolt's own syncs, after a
// checkpoint) before the file could outgrow it. It does not log either on
// a filesystem with less than walMinFree free (checked at Open and at each
// checkpoint).
//
// The files, in the directory <store>.wal: "checkpoint" (written to a
// temporary name, synced and renamed), and the segments, "<n>.log" in hex.
// A segment is filled with zeros before it is used (an fdatasync over
// blocks already written costs less than one that also records the file's
// growth), by recycling the segment a checkpoint frees. A record: its
// length (4 bytes, of the operations), a CRC-32C of the rest (4), the
// transaction's id (8), and the operations.

const (
	recordHeader = 16
	// walSegmentBytes is the size a segment is prepared to.
	walSegmentBytes = 32 << 20
	// checkpointEvery of time with anything logged starts a checkpoint
	// (and so does checkpointBytes of log).
	checkpointEvery = 10 * time.Second
	// checkpointFile is the checkpoint's name in the log's directory.
	checkpointFile = "checkpoint"
	// checkpointMagic starts a checkpoint file.
	checkpointMagic = "HOLONCKP"
	// metaBytes is the part of a bbolt meta page that matters: the page's
	// header (16 bytes) and the meta (64, its checksum last).
	metaBytes = 80
	// boltMagic is bbolt's meta magic.
	boltMagic = 0xED0CDAED
)

// walMapBytes is how much of the file bbolt maps from the start (address
// space only: nothing is read or resident until used). 0 where the
// address space is too small: the store then does not log.
var walMapBytes = func() int {
	if math.MaxInt > 1<<40 {
		return 256 << 30
	}
	return 0
}()

// walMinFree is the free space the store needs on its filesystem to log:
// the log's segments, and the pages written between two checkpoints,
// which cannot reuse the pages freed meanwhile (a few times
// checkpointPages and walSegmentBytes). With less, it commits with
// bbolt's own syncs, which reuse freed pages at once: a nearly full disk
// then fills no faster than before.
var walMinFree int64 = 256 << 20 // a variable for tests

// walMapSpare is the room kept between the file's end and walMapBytes:
// past it, the store stops logging.
const walMapSpare = 4 << 30

// checkpointBytes of log, or checkpointPages of pages written, start a
// checkpoint (variables for tests).
var (
	checkpointBytes int64 = 16 << 20
	checkpointPages int64 = 32 << 20
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// walDir is the directory of the log of the store at path.
func walDir(path string) string { return path + ".wal" }

func segmentName(n uint64) string { return fmt.Sprintf("%016x.log", n) }

// wal is the writer's side of the log: the segment being appended to.
type wal struct {
	dir    string
	noSync bool
	seg    uint64
	f      *os.File
	off    int64
	// since is the log written since the last checkpoint began, and last
	// when it began.
	since int64
	last  time.Time
	// pagesAt is bbolt's page bytes written when the last checkpoint
	// began (see due).
	pagesAt int64
	// prepared is whether the segment was prepared (prepareSegment): the
	// first one is not, so that opening a store writes no segment whole.
	prepared bool

	// spare is the next segment, prepared by the checkpointer; spareSeg
	// its number.
	spareMu  sync.Mutex
	spare    *os.File
	spareSeg uint64

	// bytes and syncTime count what the log wrote and its syncs' time.
	bytes    int64
	syncs    int64
	syncTime time.Duration

	// commitReq hands the committer a transaction to commit, commitDone
	// its outcome (commitWhileSyncing).
	commitReq  chan *bolt.Tx
	commitDone chan error
	// beforeSync, set by tests only, runs on the writer before each
	// fdatasync of the log.
	beforeSync func()
}

// write appends a transaction's record to the log, not yet durable (see
// commitWhileSyncing): r holds its operations after room for the header.
func (w *wal) write(txid uint64, r *redoBuf) error {
	rec := r.b
	binary.LittleEndian.PutUint32(rec[0:], uint32(len(rec)-recordHeader))
	binary.LittleEndian.PutUint64(rec[8:], txid)
	binary.LittleEndian.PutUint32(rec[4:], crc32.Checksum(rec[8:], castagnoli))
	if _, err := w.f.WriteAt(rec, w.off); err != nil {
		return fmt.Errorf("write the store's log: %w", err)
	}
	w.off += int64(len(rec))
	w.since += int64(len(rec))
	w.bytes += int64(len(rec))
	return nil
}

// commitWhileSyncing commits btx, bbolt's transaction of the record just
// written, on the log's committer goroutine while the writer fdatasyncs
// the record itself, and returns when both are done: the sync's error
// first, then the commit's. The writer syncs and the committer commits,
// not the other way round: a parked goroutine takes tens of microseconds
// to wake on a virtual machine, and the commit (CPU work, tens of
// microseconds) can start that late and still end before the sync, while
// a sync handed to a goroutine started that much later.
func (w *wal) commitWhileSyncing(btx *bolt.Tx) (syncErr, commitErr error) {
	if w.noSync {
		return nil, btx.Commit()
	}
	if w.commitReq == nil {
		w.commitReq, w.commitDone = make(chan *bolt.Tx), make(chan error)
		go committer(w.commitReq, w.commitDone)
	}
	w.commitReq <- btx
	syncErr = w.sync()
	return syncErr, <-w.commitDone
}

// sync fdatasyncs the segment being written.
func (w *wal) sync() error {
	if w.beforeSync != nil {
		w.beforeSync()
	}
	start := time.Now()
	if err := datasync(w.f); err != nil {
		return fmt.Errorf("sync the store's log: %w", err)
	}
	w.syncTime += time.Since(start)
	w.syncs++
	return nil
}

// committer commits the transactions commitWhileSyncing hands it until
// the log closes.
func committer(req <-chan *bolt.Tx, done chan<- error) {
	for btx := range req {
		done <- btx.Commit()
	}
}

// takeBack erases the last record, of a transaction bbolt then failed to
// commit, so that a restart does not replay it: its callers were told it
// failed.
func (w *wal) takeBack(n int) error {
	w.off -= int64(n)
	w.since -= int64(n)
	if _, err := w.f.WriteAt(make([]byte, recordHeader), w.off); err != nil {
		return err
	}
	if w.noSync {
		return nil
	}
	return datasync(w.f)
}

// due reports whether a checkpoint should begin.
// An unprepared segment is left early, after unpreparedBytes: the
// checkpoint then prepares a spare, and the next one moves to it.
// pages is how many bytes of pages bbolt has written in all: pages
// written since the last checkpoint are kept (pinned) until the next, and
// its fdatasync writes them all, so their amount starts one too.
func (w *wal) due(pages int64) bool {
	return w.since >= checkpointBytes || pages-w.pagesAt >= checkpointPages ||
		(!w.prepared && w.off >= unpreparedBytes) ||
		(w.since > 0 && time.Since(w.last) >= checkpointEvery)
}

// unpreparedBytes is how much log an unprepared segment takes before a
// checkpoint moves the log on (see due).
const unpreparedBytes = 1 << 20

// rotate moves the log to the next segment: the spare when it is ready,
// else a new file (made durable in the directory first).
func (w *wal) rotate() error {
	next := w.seg + 1
	w.spareMu.Lock()
	f := w.spare
	if f != nil && w.spareSeg != next {
		f.Close()
		f = nil
	}
	w.spare = nil
	w.spareMu.Unlock()
	prepared := f != nil
	if f == nil {
		var err error
		if f, err = os.OpenFile(filepath.Join(w.dir, segmentName(next)), os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o600); err != nil {
			return err
		}
		if err := syncDir(w.dir); err != nil {
			f.Close()
			return err
		}
	}
	w.f.Close()
	w.prepared = prepared
	w.f, w.seg, w.off = f, next, 0
	w.since, w.last = 0, time.Now()
	return nil
}

func (w *wal) close() {
	if w.commitReq != nil {
		close(w.commitReq)
		w.commitReq = nil
	}
	if w.f != nil {
		w.f.Close()
	}
	w.spareMu.Lock()
	if w.spare != nil {
		w.spare.Close()
		w.spare = nil
	}
	w.spareMu.Unlock()
}

// checkpoint is what the checkpoint file holds: bbolt's file alone holds
// transaction txid, whose meta page is meta, and the records after it
// start in segment first.
type checkpoint struct {
	txid  uint64
	first uint64
	meta  []byte
}

func (c checkpoint) encode() []byte {
	b := make([]byte, 0, 8+8+8+4+metaBytes+4)
	b = append(b, checkpointMagic...)
	b = binary.LittleEndian.AppendUint64(b, c.txid)
	b = binary.LittleEndian.AppendUint64(b, c.first)
	b = binary.LittleEndian.AppendUint32(b, uint32(len(c.meta)))
	b = append(b, c.meta...)
	return binary.LittleEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
}

func decodeCheckpoint(b []byte) (checkpoint, error) {
	bad := errors.New("the store's log has a damaged checkpoint file")
	if len(b) != 8+8+8+4+metaBytes+4 || string(b[:8]) != checkpointMagic {
		return checkpoint{}, bad
	}
	body, sum := b[:len(b)-4], binary.LittleEndian.Uint32(b[len(b)-4:])
	if crc32.Checksum(body, castagnoli) != sum || binary.LittleEndian.Uint32(b[24:]) != metaBytes {
		return checkpoint{}, bad
	}
	c := checkpoint{
		txid:  binary.LittleEndian.Uint64(b[8:]),
		first: binary.LittleEndian.Uint64(b[16:]),
		meta:  slices.Clone(b[28 : 28+metaBytes]),
	}
	if metaTxid(c.meta) != c.txid {
		return checkpoint{}, bad
	}
	return c, nil
}

// writeCheckpoint replaces the checkpoint file, durably.
func writeCheckpoint(dir string, c checkpoint, noSync bool) error {
	tmp := filepath.Join(dir, checkpointFile+".tmp")
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	_, err = f.Write(c.encode())
	if err == nil && !noSync {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, filepath.Join(dir, checkpointFile))
	}
	if err == nil && !noSync {
		err = syncDir(dir)
	}
	return err
}

// readCheckpoint reads the log's checkpoint; found is false when there is
// none (no log, or one whose first checkpoint never became durable: then
// nothing was logged after it, and the file is as bbolt synced it).
func readCheckpoint(dir string) (c checkpoint, found bool, err error) {
	b, err := os.ReadFile(filepath.Join(dir, checkpointFile))
	if errors.Is(err, os.ErrNotExist) {
		return checkpoint{}, false, nil
	}
	if err != nil {
		return checkpoint{}, false, err
	}
	c, err = decodeCheckpoint(b)
	return c, err == nil, err
}

// metaTxid is the transaction id of a meta page's first metaBytes.
func metaTxid(meta []byte) uint64 { return binary.LittleEndian.Uint64(meta[64:]) }

// readMeta reads from the file the meta page bbolt just wrote for txid
// (it writes transaction t's in page t%2).
func readMeta(f *os.File, pageSize int, txid uint64) ([]byte, error) {
	meta := make([]byte, metaBytes)
	if _, err := f.ReadAt(meta, int64(txid%2)*int64(pageSize)); err != nil {
		return nil, fmt.Errorf("read the meta page of transaction %d: %w", txid, err)
	}
	if binary.LittleEndian.Uint32(meta[16:]) != boltMagic || metaTxid(meta) != txid {
		return nil, fmt.Errorf("the meta page of transaction %d is not in the file", txid)
	}
	return meta, nil
}

// restoreMeta writes a checkpoint's meta page over both of the file's, so
// that bbolt opens on it.
func restoreMeta(path string, c checkpoint) error {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	// The page size is in the meta (after magic and version).
	pageSize := int64(binary.LittleEndian.Uint32(c.meta[16+8:]))
	if pageSize < 1024 || pageSize > 1<<20 {
		return fmt.Errorf("the store's log checkpoint names a page size of %d", pageSize)
	}
	for slot := range int64(2) {
		page := slices.Clone(c.meta)
		binary.LittleEndian.PutUint64(page[0:], uint64(slot))
		if _, err := f.WriteAt(page, slot*pageSize); err != nil {
			return err
		}
	}
	return datasync(f)
}

// segments lists the numbers of the log's segments, in order.
func segments(dir string) ([]uint64, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var segs []uint64
	for _, e := range ents {
		name, ok := strings.CutSuffix(e.Name(), ".log")
		if !ok {
			continue
		}
		if n, err := strconv.ParseUint(name, 16, 64); err == nil && len(name) == 16 {
			segs = append(segs, n)
		}
	}
	slices.Sort(segs)
	return segs, nil
}

// replay applies the records after checkpoint c, in order, each in a
// transaction of its own (bbolt numbers it as the record says), and
// returns the last transaction's id.
func replay(db *bolt.DB, dir string, c checkpoint) (last uint64, records int, err error) {
	segs, err := segments(dir)
	if err != nil {
		return 0, 0, err
	}
	last = c.txid
	for _, n := range segs {
		if n < c.first {
			continue
		}
		data, err := os.ReadFile(filepath.Join(dir, segmentName(n)))
		if err != nil {
			return 0, 0, err
		}
		applied := 0
		for {
			ops, txid, rest, ok := nextRecord(data)
			if !ok || txid != last+1 {
				break
			}
			data = rest
			if replayFault != nil && replayFault(records+applied) {
				return 0, 0, errors.New("replay: injected crash (test)")
			}
			err := db.Update(func(btx *bolt.Tx) error {
				if uint64(btx.ID()) != txid {
					return fmt.Errorf("the store's file is at transaction %d, its log's next record is %d", btx.ID()-1, txid)
				}
				return applyOps(btx, ops)
			})
			if err != nil {
				return 0, 0, fmt.Errorf("replay the store's log: %w", err)
			}
			last = txid
			applied++
		}
		records += applied
		if applied == 0 && n > c.first {
			// A segment the writer had not reached: none after it was
			// either.
			break
		}
	}
	return last, records, nil
}

// replayFault, set by tests only, stops a replay (as a crash would) before
// the record it returns true for (counted from 0).
var replayFault func(n int) bool

// nextRecord reads the record at the start of data: ok is false at the
// log's end (zeros, a torn or stale record, or too few bytes).
func nextRecord(data []byte) (ops []byte, txid uint64, rest []byte, ok bool) {
	if len(data) < recordHeader {
		return nil, 0, nil, false
	}
	// A transaction that wrote nothing has a record with no operations:
	// zeros (a prepared segment) are told from it by the CRC.
	n := int64(binary.LittleEndian.Uint32(data[0:]))
	if n > int64(len(data)-recordHeader) {
		return nil, 0, nil, false
	}
	end := recordHeader + int(n)
	if crc32.Checksum(data[8:end], castagnoli) != binary.LittleEndian.Uint32(data[4:]) {
		return nil, 0, nil, false
	}
	return data[recordHeader:end], binary.LittleEndian.Uint64(data[8:]), data[end:], true
}

// prepareSegment makes path a segment of walSegmentBytes whose blocks are
// all written, durably (reusing the file there, a freed segment, if any).
func prepareSegment(path string, noSync bool) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, err
	}
	fail := func(err error) (*os.File, error) {
		f.Close()
		return nil, err
	}
	st, err := f.Stat()
	if err != nil {
		return fail(err)
	}
	// The old records stay where they are: a record is read only when it
	// is the next transaction's, which an old one never is. Its first
	// header is zeroed all the same.
	if _, err := f.WriteAt(make([]byte, recordHeader), 0); err != nil {
		return fail(err)
	}
	if size := st.Size(); size < walSegmentBytes && !noSync {
		zeros := make([]byte, 1<<20)
		for off := size; off < walSegmentBytes; off += int64(len(zeros)) {
			if _, err := f.WriteAt(zeros[:min(int64(len(zeros)), walSegmentBytes-off)], off); err != nil {
				return fail(err)
			}
		}
	}
	if !noSync {
		if err := f.Sync(); err != nil {
			return fail(err)
		}
	}
	return f, nil
}

// removeLog removes the log's directory once bbolt's file holds everything
// (synced): the checkpoint first, so that no later start can take the
// segments' absence for a loss.
func removeLog(dir string) error {
	if err := os.Remove(filepath.Join(dir, checkpointFile)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	if err := syncDir(dir); err != nil {
		return err
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range ents {
		if err := os.Remove(filepath.Join(dir, e.Name())); err != nil {
			return err
		}
	}
	if err := syncDir(dir); err != nil {
		return err
	}
	if err := os.Remove(dir); err != nil {
		return err
	}
	return syncDir(filepath.Dir(dir))
}

// logPending reports whether the store at path has a log to recover from
// (it was not closed cleanly).
func logPending(path string) bool {
	_, found, err := readCheckpoint(walDir(path))
	return found || err != nil
}
