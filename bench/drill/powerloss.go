package drill

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"holon.dev/holon/bench/drill/lossyfs"
)

// powerlossDrill runs the real gateway with its data directory (the store,
// the uploaded files beside it, the live backups taken of it and the
// stores restored from them) on a lossy filesystem, under the crash
// drill's load plus uploads, a live backup and a restore running now and
// then; at random moments it cuts the power: every process on the
// filesystem is SIGKILLed, everything not fsynced (writes, and names not
// covered by their directory's fsync) is discarded, sometimes keeping a
// random prefix of a file's unsynced writes (a torn write), and the
// gateway restarts on what is left. After each cut: holon verify and
// bbolt's own consistency check pass, the calls in flight are closed
// unbilled by the restart, every upload answered 201 is there with its
// size and SHA-256, every backup reported done is there and whole, every
// restore is complete or not begun; at the end the crash drill's
// invariants are held against everything the clients were answered.
func powerlossDrill(ctx context.Context, d *drill) error {
	if err := lossyfs.Available(); err != nil {
		msg := fmt.Sprintf("powerloss skipped: a lossy FUSE filesystem cannot be mounted here: %v", err)
		if d.o.Strict {
			return errors.New(msg + " (HOLON_TEST_STRICT=1)")
		}
		d.note("%s", msg)
		d.skipped = true
		return nil
	}
	cuts := pick(d.o.Kills, d.o.Long, 8, 60)
	clients := pick(d.o.Clients, d.o.Long, 8, 24)
	maxUp := pick(d.o.Duration/time.Duration(max(cuts, 1)), d.o.Long, 700*time.Millisecond, 2*time.Second)
	rng := rand.New(rand.NewPCG(uint64(d.o.Seed), 5))

	fsys, err := lossyfs.Mount(filepath.Join(d.dir, "disk"), filepath.Join(d.dir, "mnt"))
	if err != nil {
		return err
	}
	defer func() {
		if err := fsys.Close(); err != nil {
			d.check("the lossy filesystem unmounts at the end", false, "%v", err)
		}
	}()
	data := fsys.Dir()
	for _, sub := range []string{"backups", "restores"} {
		if err := os.Mkdir(filepath.Join(data, sub), 0o700); err != nil {
			return err
		}
	}
	if err := syncDirOf(data); err != nil {
		return err
	}

	agents, registry, err := d.startStandardAgents()
	if err != nil {
		return err
	}
	defer agents.close()
	db := filepath.Join(data, "holon.db")
	g, err := d.newGateway(db, registry)
	if err != nil {
		return err
	}
	if err := g.start(ctx); err != nil {
		return err
	}
	defer g.kill()
	c := newAPI(g.url, clients*2)
	acc, totals, err := c.crasher(ctx, g.adminKey)
	if err != nil {
		return err
	}
	up, err := c.signup(ctx, "uploader", g.adminKey, "")
	if err != nil {
		return err
	}
	// What the setup wrote is durable before the first cut: a gateway
	// that answered it did so after its commit.

	l := newCrashLoad(d, []*api{c}, acc, agents)
	p := &powerRun{d: d, c: c, up: up, g: g, data: data, files: map[string]upload{}}
	var inFlight []string
	for k := range cuts {
		loadCtx, stopLoad := context.WithCancel(ctx)
		var wg sync.WaitGroup
		for w := range clients {
			wg.Add(1)
			go func() {
				defer wg.Done()
				l.worker(loadCtx, rand.New(rand.NewPCG(uint64(d.o.Seed), uint64(k*1000+w)+2)))
			}()
		}
		for w := range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				p.uploader(loadCtx, rand.New(rand.NewPCG(uint64(d.o.Seed), uint64(k*1000+w)+500)))
			}()
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			p.operator(loadCtx, rand.New(rand.NewPCG(uint64(d.o.Seed), uint64(k)+900)))
		}()

		upFor := time.Duration(150+rng.IntN(int(maxUp/time.Millisecond))) * time.Millisecond
		var early error
		select {
		case <-time.After(upFor):
		case <-ctx.Done():
			early = ctx.Err()
		case <-g.done():
			logs := g.logs()
			_ = os.WriteFile(filepath.Join(d.dir, "gateway.log"), []byte(logs), 0o600)
			early = fmt.Errorf("the gateway exited on its own before cut %d: %v (its log: gateway.log in the work directory)\n%s", k+1, g.exitErr(), crashLog(logs))
		}
		// The power goes: every process on the filesystem dies at once.
		p.cutting.Store(true)
		g.kill()
		stopLoad()
		wg.Wait()
		if early != nil {
			return early
		}
		before := fsys.Stats()
		var torn *rand.Rand
		if rng.IntN(2) == 0 {
			torn = rng
		}
		if err := fsys.Cut(torn); err != nil {
			return fmt.Errorf("cut %d: %w", k+1, err)
		}
		after := fsys.Stats()
		d.count("power cuts (SIGKILL, unsynced writes and names discarded, remount, restart)", 1)
		if torn != nil {
			d.count("cuts keeping a random prefix of each file's unsynced writes (torn)", 1)
		}
		if after.LostWrites > before.LostWrites || after.LostEntries > before.LostEntries {
			d.count("cuts that discarded unsynced writes or names", 1)
		}
		d.count("unsynced writes discarded by the cuts", after.LostWrites-before.LostWrites)
		d.count("unsynced directory entries undone by the cuts", after.LostEntries-before.LostEntries)

		out, err := verifyStore(ctx, d.o.Holon, db)
		d.check("holon verify passes after a cut", err == nil, "after cut %d: %v\n%s", k+1, err, tail(out, 1500))
		boltCheck(d, db, fmt.Sprintf("after cut %d", k+1))
		v, err := readStore(db)
		if err != nil {
			return fmt.Errorf("read the store after cut %d: %w", k+1, err)
		}
		d.checkRestarted(v, inFlight, k)
		inFlight = inFlight[:0]
		for _, h := range v.holds {
			inFlight = append(inFlight, h.Receipt)
		}
		d.count("calls in flight at a cut", int64(len(inFlight)))
		if err := p.checkFiles(db, rng, false); err != nil {
			return fmt.Errorf("after cut %d: %w", k+1, err)
		}
		p.checkBackups(ctx, k)
		if err := g.start(ctx); err != nil {
			return fmt.Errorf("restart after cut %d: %w", k+1, err)
		}
		p.cutting.Store(false)
		if err := l.checkAPI(ctx, c, totals); err != nil {
			return err
		}
	}
	if err := g.stop(); err != nil {
		return err
	}
	v, err := d.checkStore(ctx, db, totals)
	if err != nil {
		return err
	}
	d.checkRestarted(v, inFlight, cuts)
	l.checkAnswers(v, agents)
	if err := p.checkFiles(db, rng, true); err != nil {
		return err
	}
	st := fsys.Stats()
	d.count("writes through the lossy filesystem", st.Writes)
	d.count("fsyncs of files", st.Syncs)
	d.count("fsyncs of directories", st.DirSyncs)

	d.floor("calls answered 200", int64(5*cuts))
	d.floor("uploads answered 201", int64(cuts))
	d.floor("cuts that discarded unsynced writes or names", int64(cuts/2))
	d.floor("calls in flight at a cut", 1)
	d.floor("backups reported done, found whole after a cut", 1)
	d.floor("restores in progress at a cut, or done before it", 1)
	return nil
}

// upload is a file the gateway answered 201 for.
type upload struct {
	size int64
	sha  string
}

// powerRun is the power-loss drill's uploads, backups and restores, and
// what the gateway answered for them.
type powerRun struct {
	d    *drill
	c    *api
	up   *account
	g    *gatewayProc
	data string
	seq  int
	// cutting is set from the kill of a cut to the restart: a command
	// failing then failed because of the cut.
	cutting atomic.Bool

	mu    sync.Mutex
	files map[string]upload
	// fresh are the uploads answered since the last cut.
	fresh []string
	// backups are those reported done and not yet checked after a cut;
	// whole are the ones checked, the restores' sources.
	backups, whole []string
	// restores are the restores begun since the last cut: done when
	// holon restore exited 0 before the cut.
	restores map[string]bool
}

// uploader uploads files of random sizes (1 byte to 256 KB) until ctx ends.
func (p *powerRun) uploader(ctx context.Context, rng *rand.Rand) {
	for ctx.Err() == nil {
		n := 1 + rng.IntN(4<<10)
		if rng.IntN(8) == 0 {
			n = 1 + rng.IntN(256<<10)
		}
		body := make([]byte, n)
		for i := range body {
			body[i] = byte(rng.Uint32())
		}
		a, err := p.c.do(ctx, "POST", "/v0/files", p.up.human, body, "Content-Type", "application/octet-stream")
		p.d.count("uploads sent", 1)
		if err != nil {
			time.Sleep(20 * time.Millisecond)
			continue
		}
		if a.Status != http.StatusCreated {
			p.d.count(fmt.Sprintf("uploads answered %d %s", a.Status, a.code()), 1)
			continue
		}
		var got struct {
			File   string `json:"file"`
			Size   int64  `json:"size"`
			SHA256 string `json:"sha256"`
		}
		_ = jsonUnmarshal(a.Body, &got)
		sum := sha256.Sum256(body)
		want := hex.EncodeToString(sum[:])
		p.d.check("an upload answered 201 names its size and SHA-256", got.Size == int64(n) && got.SHA256 == want,
			"%s: size %d sha %s, sent %d %s", got.File, got.Size, got.SHA256, n, want)
		p.d.count("uploads answered 201", 1)
		id := strings.TrimPrefix(got.File, "holon://files/")
		p.mu.Lock()
		p.files[id] = upload{size: int64(n), sha: want}
		p.fresh = append(p.fresh, id)
		p.mu.Unlock()
	}
}

// operator takes live backups of the running gateway and restores the
// last whole one into a new store, one after the other, until ctx ends
// (the cut kills whichever is running).
func (p *powerRun) operator(ctx context.Context, rng *rand.Rand) {
	for ctx.Err() == nil {
		select {
		case <-time.After(time.Duration(rng.IntN(150)) * time.Millisecond):
		case <-ctx.Done():
			return
		}
		p.mu.Lock()
		p.seq++
		seq := p.seq
		var src string
		if len(p.whole) > 0 && rng.IntN(2) == 0 {
			src = p.whole[len(p.whole)-1]
		}
		p.mu.Unlock()
		if src == "" {
			out := filepath.Join(p.data, "backups", fmt.Sprintf("b-%d.jsonl", seq))
			err := p.run(ctx, []string{"HOLON_KEY=" + p.g.adminKey}, "backup", "--url", p.g.url, "--out", out)
			p.d.count("live backups begun", 1)
			if err == nil {
				p.d.count("live backups reported done", 1)
				p.mu.Lock()
				p.backups = append(p.backups, out)
				p.mu.Unlock()
			}
			continue
		}
		to := filepath.Join(p.data, "restores", fmt.Sprintf("r-%d.db", seq))
		p.mu.Lock()
		if p.restores == nil {
			p.restores = map[string]bool{}
		}
		p.restores[to] = false
		p.mu.Unlock()
		err := p.run(ctx, nil, "restore", "--in", src, "--db", to)
		p.d.count("restores begun", 1)
		if err == nil {
			p.mu.Lock()
			p.restores[to] = true
			p.mu.Unlock()
		}
	}
}

// run runs the holon binary; the cut (ctx) SIGKILLs it.
func (p *powerRun) run(ctx context.Context, env []string, args ...string) error {
	cmd := execCommand(ctx, p.d.o.Holon, args...)
	cmd.Env = append(childEnv(), env...)
	out, err := cmd.CombinedOutput()
	if err != nil && ctx.Err() == nil && !p.cutting.Load() {
		p.d.note("holon %s failed with the gateway up: %v: %s", args[0], err, tail(string(out), 300))
	}
	return err
}

// checkFiles holds uploads answered 201 against the store and the files
// directory: each one's record is there, and its bytes, with its size and
// SHA-256. It checks those answered since the last cut and a sample of 64
// older ones, or, when all is set, every one.
func (p *powerRun) checkFiles(db string, rng *rand.Rand, all bool) error {
	recs, err := readFileRecords(db)
	if err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	ids := p.fresh
	p.fresh = nil
	if all {
		ids = ids[:0]
		for id := range p.files {
			ids = append(ids, id)
		}
	} else {
		older := make([]string, 0, len(p.files))
		for id := range p.files {
			older = append(older, id)
		}
		for range min(64, len(older)) {
			ids = append(ids, older[rng.IntN(len(older))])
		}
	}
	for _, id := range ids {
		u := p.files[id]
		r, ok := recs[id]
		p.d.check("every upload answered 201 keeps its record across a cut", ok && r.Size == u.size && r.SHA256 == u.sha,
			"%s: record %+v, answered %+v", id, r, u)
		b, err := os.ReadFile(filepath.Join(db+".files", "blobs", u.sha[:2], u.sha))
		sum := sha256.Sum256(b)
		p.d.check("every upload answered 201 keeps its bytes, size and SHA-256 across a cut",
			err == nil && int64(len(b)) == u.size && hex.EncodeToString(sum[:]) == u.sha,
			"%s (%d bytes, %s): read %d bytes: %v", id, u.size, u.sha, len(b), err)
	}
	return nil
}

// checkBackups checks, after cut k, the backups reported done since the
// last cut (there and whole) and the restores begun (complete, or not
// begun: no store at that name).
func (p *powerRun) checkBackups(ctx context.Context, k int) {
	p.mu.Lock()
	backups, restores := p.backups, p.restores
	p.backups, p.restores = nil, nil
	p.mu.Unlock()
	for _, b := range backups {
		err := checkBackupFile(b)
		if p.d.check("a backup reported done is there and whole after a cut", err == nil, "%s after cut %d: %v", filepath.Base(b), k+1, err) {
			p.d.count("backups reported done, found whole after a cut", 1)
			p.mu.Lock()
			p.whole = append(p.whole, b)
			p.mu.Unlock()
		}
	}
	for to, done := range restores {
		_, err := os.Stat(to)
		exists := err == nil
		if done {
			p.d.count("restores done before a cut", 1)
		} else {
			p.d.count("restores in progress at a cut", 1)
		}
		if !exists {
			p.d.check("a restore missing after a cut had not been reported done", !done, "%s after cut %d: %v", filepath.Base(to), k+1, err)
			if !done {
				p.d.count("restores in progress at a cut, or done before it", 1)
				p.d.count("restores cut before their rename: not begun", 1)
			}
			continue
		}
		out, err := verifyStore(ctx, p.d.o.Holon, to)
		p.d.check("a restore is complete or not begun after a cut (never a broken store at its name)", err == nil,
			"%s after cut %d (done %v): %v\n%s", filepath.Base(to), k+1, done, err, tail(out, 800))
		boltCheck(p.d, to, fmt.Sprintf("restore %s after cut %d", filepath.Base(to), k+1))
		p.d.count("restores in progress at a cut, or done before it", 1)
	}
}
