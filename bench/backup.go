package bench

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"time"

	"holon.dev/holon/appliance"
	"holon.dev/holon/backup"
	"holon.dev/holon/kv"
)

// Targets of the backup rows.
const (
	// targetBackupP99 bounds settled calls' p99 during a live backup, as a
	// multiple of their p99 without one.
	targetBackupP99 = 2.0
	// targetRestoreHeap bounds the restore's peak heap.
	targetRestoreHeap = 256 << 20
	// targetRestoreTime bounds a restore of 1,000,000 settled calls: 1.5 ×
	// the 24.4 s main's one-transaction restore took on the 2-core machine.
	targetRestoreTime = 36_600 * time.Millisecond
)

// liveBackup builds a store of Receipts settled calls (receipts, journal
// entries, events), serves it, and measures row 1's load on it without a
// backup, then during a live backup taken through GET /v0/admin/backup, as
// an operator takes one; then restores that backup into a new file,
// measuring its time and peak heap, and checks the restored journal.
func (b *bench) liveBackup(ctx context.Context) ([]*Result, error) {
	o := b.o
	dir := filepath.Join(o.Dir, "backup")
	db := filepath.Join(dir, "holon.db")
	t := time.Now()
	size, err := buildReceipts(ctx, db, o.Receipts)
	if err != nil {
		return nil, fmt.Errorf("build the store: %w", err)
	}
	built := fmt.Sprintf("store of %s settled calls (%s file: receipts, journal, events) built in %.1fs", thousands(int64(o.Receipts)), mb(float64(size)), time.Since(t).Seconds())
	g, err := openGateway(ctx, gatewayConfig{dir: dir, db: db})
	if err != nil {
		return nil, err
	}
	closed := false
	defer func() {
		if !closed {
			g.Close()
		}
	}()
	dc := newDevCaller(g.url, o.Clients)
	before, err := g.money()
	if err != nil {
		return nil, err
	}
	base, err := runLoad(ctx, o.Clients, warmUp(o), o.Duration, dc.call)
	if err != nil {
		return nil, fmt.Errorf("calls without a backup: %w", err)
	}
	var took time.Duration
	var copied int64
	var berr error
	stop, err := startProfile(o, "backup.pprof")
	if err != nil {
		return nil, err
	}
	st0 := g.Store().Stats()
	// The live copy is read and checked (its rows, count and checksum) but
	// not written: an operator's copy goes to another machine, and this
	// one's disk is the gateway's.
	during, err := runLoadDuring(ctx, o.Clients, 200*time.Millisecond, func(ctx context.Context) {
		t := time.Now()
		copied, berr = fetchBackup(ctx, g.url, "")
		took = time.Since(t)
	}, dc.call)
	st1 := g.Store().Stats()
	prof := stop()
	if err == nil {
		err = berr
	}
	if err != nil {
		return nil, fmt.Errorf("calls during a live backup: %w", err)
	}
	checked, err := g.checkMoney(before, int(dc.answered()))
	if err != nil {
		return nil, err
	}
	// The copy the restore row restores: taken once the calls are over.
	dump := filepath.Join(dir, "holon.jsonl")
	if _, err := fetchBackup(ctx, g.url, dump); err != nil {
		return nil, err
	}
	closed = true
	if err := g.Close(); err != nil {
		return nil, err
	}
	p99, p99b := base.Lat.P(0.99), during.Lat.P(0.99)
	live := &Result{
		Name:   fmt.Sprintf("[8] settled calls during a live backup of %s settled calls (GET /v0/admin/backup), %d clients", thousands(int64(o.Receipts)), o.Clients),
		Target: fmt.Sprintf("p99 ≤ %.0f × without the backup", targetBackupP99),
		Measured: fmt.Sprintf("p99 %s during the backup against %s without: %.2f× (p50 %s against %s; max %s against %s; %s against %s calls/s)",
			ms(p99b), ms(p99), float64(p99b)/float64(max(p99, 1)), ms(during.Lat.P(0.5)), ms(base.Lat.P(0.5)),
			ms(during.Lat.P(1)), ms(base.Lat.P(1)), thousands(int64(during.Rate())), thousands(int64(base.Rate()))),
		Notes: []string{built,
			fmt.Sprintf("the backup: %s in %.1fs, streamed over loopback HTTP while the calls went on, its bytes counted and dropped by a client in this process", mb(float64(copied)), took.Seconds()),
			writerShare(st0, st1).String(), checked},
	}
	if prof != "" {
		live.Notes = append(live.Notes, prof)
	}
	live.judge(float64(p99b) <= targetBackupP99*float64(p99),
		"during the backup the calls share the cores with its encoding (and here with its client) and the disk with the copy of the file it streams from: in the writer's note, updates slower than row 1's are the CPU, commits slower are the disk")

	restored, err := b.restoreRow(dump, filepath.Join(dir, "restored.db"), took)
	if err != nil {
		return nil, err
	}
	return []*Result{live, restored}, nil
}

// restoreRow restores the backup at dump into a new store at path,
// measuring its time and peak heap, then checks the restored journal.
func (b *bench) restoreRow(dump, path string, backupTook time.Duration) (*Result, error) {
	o := b.o
	f, err := os.Open(dump)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	// holon restore runs with the collector's defaults (holon serve alone
	// tunes it): so does its row.
	b.untune()
	stop := peakHeap()
	t := time.Now()
	sum, err := backup.Restore(f, path, nil)
	took := time.Since(t)
	peak := stop()
	b.untune = appliance.TuneCollector(os.Getenv)
	if err != nil {
		return nil, fmt.Errorf("restore: %w", err)
	}
	s, err := kv.OpenReadOnly(path)
	if err != nil {
		return nil, err
	}
	defer s.Close()
	if err := s.View(func(tx *kv.Tx) error { return tx.VerifyJournal() }); err != nil {
		return nil, fmt.Errorf("the restored store's journal: %w", err)
	}
	r := &Result{
		Name:     fmt.Sprintf("[9] holon restore of that backup (%s settled calls, %s rows) into a new store", thousands(int64(o.Receipts)), thousands(sum.Trailer.Rows)),
		Target:   fmt.Sprintf("peak heap ≤ %s, time ≤ %.1fs (1.5 × main's 24.4 s for 1,000,000)", mb(targetRestoreHeap), targetRestoreTime.Seconds()),
		Measured: fmt.Sprintf("%.1fs (%s rows/s), peak heap %s", took.Seconds(), thousands(int64(float64(sum.Trailer.Rows)/took.Seconds())), mb(float64(peak))),
		Notes: []string{
			fmt.Sprintf("written in transactions of a bounded size into a temporary file, synced and renamed into place once every row, count and the checksum checked out; the live backup of the same store took %.1fs", backupTook.Seconds()),
			"the restored journal checked: every entry sums to zero, balances are the sums of their lines, the hash chain holds",
		},
	}
	r.judge(peak <= targetRestoreHeap && took <= targetRestoreTime, "restore reads and checks every row of the JSONL file (JSON validation and the checksum are about half its CPU) and appends it to bbolt")
	return r, nil
}

// fetchBackup takes a live backup through the gateway's API into path;
// with no path, it only reads and checks it.
func fetchBackup(ctx context.Context, base, path string) (int64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/v0/admin/backup", nil)
	if err != nil {
		return 0, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return 0, fmt.Errorf("GET /v0/admin/backup: %s: %s", resp.Status, msg)
	}
	if path == "" {
		// As cheap a client as can be: the bytes counted and dropped, the
		// last line kept to see that the copy is whole.
		tail := &tailWriter{}
		n, err := io.Copy(tail, resp.Body)
		if err == nil && !bytes.HasPrefix(tail.lastLine(), []byte(`{"end":`)) {
			err = fmt.Errorf("the live backup ended without its trailer: %q", tail.lastLine())
		}
		return n, err
	}
	f, err := os.Create(path)
	if err != nil {
		return 0, err
	}
	n, err := io.Copy(f, resp.Body)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return n, err
}

// tailWriter keeps the last bytes written to it.
type tailWriter struct{ tail []byte }

func (t *tailWriter) Write(p []byte) (int, error) {
	t.tail = append(t.tail, p...)
	if len(t.tail) > 8192 {
		t.tail = append(t.tail[:0], t.tail[len(t.tail)-4096:]...)
	}
	return len(p), nil
}

// lastLine is the last complete line written.
func (t *tailWriter) lastLine() []byte {
	b := bytes.TrimSuffix(t.tail, []byte("\n"))
	return b[bytes.LastIndexByte(b, '\n')+1:]
}

// peakHeap samples the live heap every 20 ms until stopped and returns its
// peak.
func peakHeap() (stop func() uint64) {
	var mu sync.Mutex
	var peak uint64
	done, ended := make(chan struct{}), make(chan struct{})
	sample := func() {
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		mu.Lock()
		peak = max(peak, m.HeapAlloc)
		mu.Unlock()
	}
	runtime.GC()
	go func() {
		defer close(ended)
		t := time.NewTicker(20 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				sample()
			}
		}
	}()
	return func() uint64 {
		close(done)
		<-ended
		sample()
		mu.Lock()
		defer mu.Unlock()
		return peak
	}
}
