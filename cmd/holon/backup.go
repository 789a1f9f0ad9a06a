package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"holon.dev/holon/backup"
	"holon.dev/holon/kv"
)

// backupPath is where a gateway serves its live backup (operator only).
const backupPath = "/v0/admin/backup"

// backupCommand copies every row of a store to a JSONL file.
type backupCommand struct {
	stdout, stderr io.Writer
	getenv         func(string) string
	// client fetches live backups (http.DefaultClient when nil).
	client *http.Client
}

func (c *backupCommand) Name() string     { return "backup" }
func (c *backupCommand) Synopsis() string { return "copy every row of the store to a JSONL file" }

func (c *backupCommand) Run(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("backup", flag.ContinueOnError)
	fs.SetOutput(c.stderr)
	db := fs.String("db", "", "a stopped gateway's database file")
	url := fs.String("url", "", "a running gateway's base URL (its live backup endpoint, admin key; default: $HOLON_URL when --db is not given)")
	key := fs.String("key", "", "the gateway's admin key (default: $HOLON_KEY)")
	out := fs.String("out", "", `the backup file to write ("-" for stdout); it must not exist`)
	store := fs.String("store", "", "a PostgreSQL store's URL (postgres://…), copied live")
	fs.Usage = func() {
		fmt.Fprintln(c.stderr, `Usage: holon backup (--db FILE | --url URL | --store postgres://…) --out FILE.jsonl

Copies every row of a Holon store, counters and sequences included, from one
read transaction, as JSON Lines with a header and a checksummed trailer.

A running gateway holds its database file: back it up through the gateway
with --url or HOLON_URL (GET `+backupPath+` with the admin key from --key or
HOLON_KEY);
calls keep being served meanwhile. --db reads a stopped gateway's file.
--store reads a PostgreSQL store from one consistent snapshot while its
gateways go on serving; the file is the one the embedded store would write.
The file is written under a temporary name and renamed once complete.

Flags:`)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *db == "" && *url == "" && *store == "" {
		*url = c.getenv("HOLON_URL")
	}
	if given := btoi(*db != "") + btoi(*url != "") + btoi(*store != ""); fs.NArg() > 0 || given != 1 || *out == "" || (*store != "" && !isPostgresURL(*store)) {
		fmt.Fprintln(c.stderr, "holon backup: give one of --db, --url and --store (postgres://…), and --out")
		fs.Usage()
		return errUsage
	}
	if *key == "" {
		*key = c.getenv("HOLON_KEY")
	}
	prog := newProgress(c.stderr, "backup")
	var sum backup.Summary
	n, err := writeOutput(*out, c.stdout, func(w io.Writer) error {
		var err error
		switch {
		case *db != "":
			sum, err = backupFile(*db, w, prog.report)
		case *store != "":
			sum, err = backupPostgres(ctx, *store, w, prog.report)
		default:
			sum, err = c.backupURL(ctx, *url, *key, w, prog.report)
		}
		return err
	})
	prog.done()
	if err != nil {
		return err
	}
	fmt.Fprintf(c.stderr, "backup: %d rows in %d tables, %s, sha256 %s → %s\n",
		sum.Trailer.Rows, len(sum.Header.Tables), byteSize(n), sum.Trailer.SHA256, *out)
	return nil
}

// backupFile copies a stopped gateway's store.
func backupFile(path string, w io.Writer, progress func(done, total int64)) (backup.Summary, error) {
	s, err := kv.OpenReadOnly(path)
	if err != nil {
		return backup.Summary{}, err
	}
	defer s.Close()
	return backup.Write(w, s, backup.Options{Gateway: Version, Progress: progress})
}

// backupURL fetches a live backup and checks it (counts, checksum) while
// writing it.
func (c *backupCommand) backupURL(ctx context.Context, base, key string, w io.Writer, progress func(done, total int64)) (backup.Summary, error) {
	if key == "" {
		return backup.Summary{}, errors.New("the live backup needs the gateway's admin key: --key or HOLON_KEY")
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimRight(base, "/")+backupPath, nil)
	if err != nil {
		return backup.Summary{}, err
	}
	req.Header.Set("Authorization", "Bearer "+key)
	client := c.client
	if client == nil {
		client = http.DefaultClient
	}
	resp, err := client.Do(req)
	if err != nil {
		return backup.Summary{}, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
		return backup.Summary{}, fmt.Errorf("%s answered %s: %s", req.URL, resp.Status, strings.TrimSpace(string(msg)))
	}
	rd, err := backup.NewReader(io.TeeReader(resp.Body, w))
	if err != nil {
		return backup.Summary{}, fmt.Errorf("%s: %w", req.URL, err)
	}
	total := rd.Header().Rows
	for {
		_, err := rd.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return backup.Summary{Header: rd.Header()}, fmt.Errorf("%s: %w", req.URL, err)
		}
		if progress != nil && rd.Rows()%4096 == 0 {
			progress(rd.Rows(), total)
		}
	}
	t, _ := rd.Trailer()
	if progress != nil {
		progress(rd.Rows(), total)
	}
	return backup.Summary{Header: rd.Header(), Trailer: t}, nil
}

// writeOutput runs write into path and returns the bytes written: "-" is
// stdout; a file is created under a temporary name next to path and linked
// into place only when write succeeded, so a failed copy never looks like a
// backup.
func writeOutput(path string, stdout io.Writer, write func(io.Writer) error) (int64, error) {
	if path == "-" {
		cw := &sizeWriter{w: stdout}
		err := write(cw)
		return cw.n, err
	}
	if _, err := os.Lstat(path); err == nil {
		return 0, fmt.Errorf("%s exists: choose a new name (a backup is never overwritten)", path)
	}
	var rnd [6]byte
	rand.Read(rnd[:])
	tmp := filepath.Join(filepath.Dir(path), "."+filepath.Base(path)+".partial-"+hex.EncodeToString(rnd[:]))
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return 0, err
	}
	cw := &sizeWriter{w: f}
	err = write(cw)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		// Link, not rename: never replace a file that appeared meanwhile.
		if err = os.Link(tmp, path); err == nil {
			err = os.Remove(tmp)
		}
	}
	if err == nil {
		// The name is durable only once its directory is synced: before,
		// a power cut could take the backup reported done.
		err = syncDir(filepath.Dir(path))
	}
	if err != nil {
		os.Remove(tmp)
		return 0, err
	}
	return cw.n, nil
}

type sizeWriter struct {
	w io.Writer
	n int64
}

func (s *sizeWriter) Write(p []byte) (int, error) {
	n, err := s.w.Write(p)
	s.n += int64(n)
	return n, err
}

// progress prints "<verb>: 42% (420000/1000000 rows)" on a terminal, at
// most a few times a second; elsewhere it prints nothing.
type progress struct {
	w     io.Writer
	verb  string
	on    bool
	mu    sync.Mutex
	last  time.Time
	shown bool
}

func newProgress(w io.Writer, verb string) *progress {
	on := false
	if f, ok := w.(*os.File); ok {
		if fi, err := f.Stat(); err == nil && fi.Mode()&os.ModeCharDevice != 0 {
			on = true
		}
	}
	return &progress{w: w, verb: verb, on: on}
}

func (p *progress) report(done, total int64) {
	if !p.on {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if now := time.Now(); now.Sub(p.last) >= 200*time.Millisecond || done == total {
		p.last = now
		pct := 100.0
		if total > 0 {
			pct = float64(done) * 100 / float64(total)
		}
		fmt.Fprintf(p.w, "\r%s: %3.0f%% (%d/%d rows)", p.verb, pct, done, total)
		p.shown = true
	}
}

func (p *progress) done() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.shown {
		fmt.Fprintln(p.w)
		p.shown = false
	}
}

func byteSize(n int64) string {
	switch {
	case n < 1<<10:
		return fmt.Sprintf("%d B", n)
	case n < 1<<20:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	case n < 1<<30:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	default:
		return fmt.Sprintf("%.2f GiB", float64(n)/(1<<30))
	}
}

// syncDir fsyncs a directory, making the names in it durable.
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
