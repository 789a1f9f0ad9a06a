package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"

	"holon.dev/holon/backup"
)

// restoreCommand loads a backup into a new store, or into PostgreSQL.
type restoreCommand struct {
	stdin          io.Reader
	stdout, stderr io.Writer
}

func (c *restoreCommand) Name() string { return "restore" }
func (c *restoreCommand) Synopsis() string {
	return "load a backup into a new store, or into PostgreSQL"
}

func (c *restoreCommand) Run(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("restore", flag.ContinueOnError)
	fs.SetOutput(c.stderr)
	in := fs.String("in", "", `the backup file ("-" for stdin)`)
	db := fs.String("db", "", "the database file to create (missing, or an empty store)")
	pg := fs.String("to-postgres", "", "an empty PostgreSQL database's URL (postgres://…)")
	fs.StringVar(pg, "store", "", "the same as --to-postgres: the PostgreSQL store to create (holon serve --store then serves it)")
	fs.Usage = func() {
		fmt.Fprintln(c.stderr, `Usage: holon restore --in FILE.jsonl (--db NEW.db | --store postgres://…)

Loads a backup written by holon backup, counters and sequences included,
with memory that does not grow with the store. Nothing is written unless
the whole file checks out: a truncated or altered file, an unknown format
version, or a target that is not empty is refused and leaves the target
as it was.

--db creates a new store (stop any gateway using that path first).
--store (or --to-postgres) applies Holon's PostgreSQL schema to an empty
database and loads the backup into it: a PostgreSQL store that holon serve
--store serves from, several gateways at once, and a way to answer money
questions in SQL.

Flags:`)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 || *in == "" || (*db == "") == (*pg == "") {
		fmt.Fprintln(c.stderr, "holon restore: give --in, and one of --db and --store (postgres://…)")
		fs.Usage()
		return errUsage
	}
	r, closeIn, err := openInput(*in, c.stdin)
	if err != nil {
		return err
	}
	defer closeIn()
	prog := newProgress(c.stderr, "restore")
	defer prog.done()
	if *db != "" {
		sum, err := backup.Restore(r, *db, prog.report)
		prog.done()
		if err != nil {
			return fmt.Errorf("%s: %w (nothing was written)", *in, err)
		}
		fmt.Fprintf(c.stdout, "restored %d rows in %d tables into %s (backup of %s by gateway %s, sha256 %s)\n",
			sum.Trailer.Rows, len(sum.Header.Tables), *db, sum.Header.Time.Format("2006-01-02T15:04:05Z"), sum.Header.Gateway, sum.Trailer.SHA256)
		fmt.Fprintf(c.stdout, "check it with: holon verify --db %s\n", *db)
		return nil
	}
	sum, err := backup.LoadPostgres(ctx, r, *pg, prog.report)
	prog.done()
	if err != nil {
		return fmt.Errorf("%s: %w (nothing was written)", *in, err)
	}
	var tables []string
	for name, n := range sum.Tables {
		tables = append(tables, fmt.Sprintf("%s %d", name, n))
	}
	sort.Strings(tables)
	fmt.Fprintf(c.stdout, "loaded %d rows into PostgreSQL (backup of %s by gateway %s): %s\n",
		sum.Trailer.Rows, sum.Header.Time.Format("2006-01-02T15:04:05Z"), sum.Header.Gateway, strings.Join(tables, ", "))
	return nil
}

// openInput opens a file, or stdin for "-".
func openInput(path string, stdin io.Reader) (io.Reader, func(), error) {
	if path == "-" {
		return stdin, func() {}, nil
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, err
	}
	return f, func() { f.Close() }, nil
}
