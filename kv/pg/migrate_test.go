package pg_test

import (
	"bytes"
	"context"
	"os"
	"strconv"
	"testing"

	"github.com/jackc/pgx/v5"

	"holon.dev/holon"
	"holon.dev/holon/backup"
	"holon.dev/holon/gateway/storetest"
	"holon.dev/holon/journal"
	"holon.dev/holon/kv"
	"holon.dev/holon/kv/pg"
)

// Ensure that the store's records are kv's version (a backup of either
// reads the same).
func TestStoreSchema_IsKVs(t *testing.T) {
	if pg.StoreSchema != kv.SchemaVersion {
		t.Errorf("pg.StoreSchema %d, kv.SchemaVersion %d", pg.StoreSchema, kv.SchemaVersion)
	}
}

// Ensure that the store creates its schema in an empty database, and
// migrates a database at each earlier version to the newest, keeping what
// it holds; that two stores opening the same empty database at once
// apply each version once; and that a database of a newer version, or one
// holding other tables, is refused.
func TestMigrate(t *testing.T) {
	dbs := newDatabases(t)
	ctx := context.Background()
	newest := pg.SchemaVersion()
	if newest < 2 {
		t.Fatalf("%d schema versions", newest)
	}
	version := func(url string) int {
		conn := dbs.srv.Connect(t, url)
		v, err := pg.Version(ctx, conn)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}

	t.Run("from empty, two at once", func(t *testing.T) {
		url := dbs.url(t, "empty")
		errs := make(chan error, 2)
		stores := make(chan *pg.Store, 2)
		for range 2 {
			go func() {
				s, err := pg.Open(ctx, url, holon.StoreOptions{})
				errs <- err
				stores <- s
			}()
		}
		for range 2 {
			if err := <-errs; err != nil {
				t.Fatal(err)
			}
			defer (<-stores).Close()
		}
		if v := version(url); v != newest {
			t.Errorf("version %d, want %d", v, newest)
		}
		var n int
		dbs.srv.Connect(t, url).QueryRow(ctx, `SELECT count(*) FROM holon_schema`).Scan(&n)
		if n != newest {
			t.Errorf("holon_schema has %d rows, want one per version (%d)", n, newest)
		}
	})

	for from := 1; from < newest; from++ {
		t.Run("from version "+strconv.Itoa(from), func(t *testing.T) {
			url := dbs.url(t, "from"+strconv.Itoa(from))
			conn := dbs.srv.Connect(t, url)
			err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
				if err := pg.ApplyTo(ctx, tx, 0, from); err != nil {
					return err
				}
				_, err := tx.Exec(ctx, `INSERT INTO accounts VALUES ('kept', 0, 0)`)
				return err
			})
			if err != nil {
				t.Fatal(err)
			}
			s, err := pg.Open(ctx, url, holon.StoreOptions{})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			if v := version(url); v != newest {
				t.Errorf("version %d after opening, want %d", v, newest)
			}
			err = s.Update(ctx, func(tx holon.Tx) error {
				// Version 2 lets a hold precede its receipt.
				if err := tx.PutHold(&holon.Hold{Receipt: "r99", Payer: "kept", Mandate: "m"}); err != nil {
					return err
				}
				e, _ := journal.Transfer("k1", "external:x", "kept", journal.MustParseAmount("1"))
				_, err := tx.AppendEntry(e)
				return err
			})
			if err != nil {
				t.Fatal(err)
			}
			var a holon.Account
			s.View(func(tx holon.Tx) (err error) { a, err = tx.Account("kept"); return err })
			if a.Balance != journal.MustParseAmount("1") {
				t.Errorf("kept = %s", a.Balance)
			}
		})
	}

	t.Run("a newer version", func(t *testing.T) {
		url := dbs.url(t, "newer")
		s, err := pg.Open(ctx, url, holon.StoreOptions{})
		if err != nil {
			t.Fatal(err)
		}
		s.Close()
		dbs.srv.Connect(t, url).Exec(ctx, `INSERT INTO holon_schema (version) VALUES ($1)`, newest+1)
		if _, err := pg.Open(ctx, url, holon.StoreOptions{}); err == nil || !bytes.Contains([]byte(err.Error()), []byte("upgrade holon")) {
			t.Errorf("opening a newer schema: %v", err)
		}
	})

	t.Run("someone else's tables", func(t *testing.T) {
		url := dbs.url(t, "other")
		dbs.srv.Connect(t, url).Exec(ctx, `CREATE TABLE invoices (id int)`)
		if _, err := pg.Open(ctx, url, holon.StoreOptions{}); err == nil || !bytes.Contains([]byte(err.Error()), []byte("invoices")) {
			t.Errorf("opening a database of other tables: %v", err)
		}
	})
}

// Ensure that a database loaded from a backup (holon restore
// --to-postgres) is one the store serves: the journal verifies, the money
// adds up with the backup's call in flight, and a new entry chains onto
// the loaded journal.
func TestStore_ServesALoadedBackup(t *testing.T) {
	dbs := newDatabases(t)
	golden, err := os.ReadFile("../../backup/testdata/fixture.holon-backup.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	url := dbs.url(t, "loaded")
	if _, err := backup.LoadPostgres(context.Background(), bytes.NewReader(golden), url, nil); err != nil {
		t.Fatal(err)
	}
	s, err := pg.Open(context.Background(), url, holon.StoreOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	check := func() {
		t.Helper()
		if err := s.View(func(tx holon.Tx) error { return tx.(*pg.Tx).VerifyJournal() }); err != nil {
			t.Fatal(err)
		}
		// The fixture's receipts are written by hand, not settled by the
		// engine (kv finds the same of them): the accounts, holds and
		// journal are checked.
		storetest.CheckMoney(t, s, storetest.AllowHolds, storetest.SkipReceipts)
	}
	check()
	var row holon.JournalRow
	err = s.Update(context.Background(), func(tx holon.Tx) error {
		e, _ := journal.Transfer("admin-credit:after-restore", "external:demo-credit", "alice", journal.MustParseAmount("1"))
		row, err = tx.AppendEntry(e)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if row.Seq != 8 {
		t.Errorf("the first entry after the load is row %d, want 8", row.Seq)
	}
	var loaded holon.JournalRow
	s.View(func(tx holon.Tx) (err error) { loaded, err = tx.EntryByKey("settle:r9"); return err })
	if loaded.Seq != 7 || row.Prev != loaded.Hash {
		t.Errorf("the first entry after the load follows %.16s, want the loaded chain's last row (%d, %.16s)", row.Prev, loaded.Seq, loaded.Hash)
	}
	check()
}
