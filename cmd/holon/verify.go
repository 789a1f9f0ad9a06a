package main

import (
	"context"
	"flag"
	"fmt"
	"io"

	"holon.dev/holon/backup"
	"holon.dev/holon/kv"
)

// verifyCommand checks a store's or a backup's integrity.
type verifyCommand struct {
	stdin          io.Reader
	stdout, stderr io.Writer
}

func (c *verifyCommand) Name() string     { return "verify" }
func (c *verifyCommand) Synopsis() string { return "check the integrity of a store or a backup" }

func (c *verifyCommand) Run(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("verify", flag.ContinueOnError)
	fs.SetOutput(c.stderr)
	db := fs.String("db", "", "a stopped gateway's database file")
	in := fs.String("in", "", `a backup file ("-" for stdin)`)
	tmp := fs.String("tmp", "", "where to restore a backup for the check (default: the system's temporary directory)")
	store := fs.String("store", "", "a PostgreSQL store's URL (postgres://…): checked live, through a backup of one snapshot")
	fs.Usage = func() {
		fmt.Fprintln(c.stderr, `Usage: holon verify (--db FILE | --in FILE.jsonl | --store postgres://…)

An offline integrity check: every journal entry sums to zero, balances are
the sums of their lines, the journal's hash chain is intact (a row altered or
removed is detected), every billed receipt has its settlement entry and every
settlement its receipt, receipt trees are complete and add up, no hold
outlives its call, counters match their rows. A backup is first checked as a
file (counts, checksum), then restored into a temporary store and checked;
a PostgreSQL store is checked as its backup, taken from one snapshot.

Prints one line per check; exits 1 when any fails.

Flags:`)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if given := btoi(*db != "") + btoi(*in != "") + btoi(*store != ""); fs.NArg() > 0 || given != 1 || (*store != "" && !isPostgresURL(*store)) {
		fmt.Fprintln(c.stderr, "holon verify: give one of --db, --in and --store (postgres://…)")
		fs.Usage()
		return errUsage
	}
	var rep *backup.Report
	if *db != "" {
		s, err := kv.OpenReadOnly(*db)
		if err != nil {
			return err
		}
		defer s.Close()
		fmt.Fprintf(c.stdout, "verify: store %s\n", *db)
		if rep, err = backup.VerifyContext(ctx, s); err != nil {
			if ctx.Err() != nil {
				return fmt.Errorf("stopped before the check finished (%v): nothing was checked to the end", context.Cause(ctx))
			}
			return err
		}
	} else if *store != "" {
		pr, pw := io.Pipe()
		go func() {
			_, err := backupPostgres(ctx, *store, pw, nil)
			pw.CloseWithError(err)
		}()
		var sum backup.Summary
		var err error
		rep, sum, err = backup.VerifyFile(pr, *tmp)
		pr.CloseWithError(err)
		if err != nil {
			return fmt.Errorf("PostgreSQL store: %w", err)
		}
		fmt.Fprintf(c.stdout, "verify: PostgreSQL store, snapshot of %s, %d rows\n", sum.Header.Time.Format("2006-01-02T15:04:05Z"), sum.Trailer.Rows)
	} else {
		r, closeIn, err := openInput(*in, c.stdin)
		if err != nil {
			return err
		}
		defer closeIn()
		var sum backup.Summary
		rep, sum, err = backup.VerifyFile(r, *tmp)
		if err != nil {
			return fmt.Errorf("%s: %w", *in, err)
		}
		fmt.Fprintf(c.stdout, "verify: backup %s of %s by gateway %s, %d rows, checksum ok\n",
			*in, sum.Header.Time.Format("2006-01-02T15:04:05Z"), sum.Header.Gateway, sum.Trailer.Rows)
	}
	if _, err := rep.WriteTo(c.stdout); err != nil {
		return err
	}
	if !rep.OK() {
		return exitError(1)
	}
	return nil
}
