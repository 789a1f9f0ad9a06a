package backup_test

import (
	"bytes"
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"holon.dev/holon"
	"holon.dev/holon/backup"
	"holon.dev/holon/backup/pgtest"
	"holon.dev/holon/kv"
)

// publishingFixture writes what publishing stores: a published version and
// a yanked one, a sealed credential, a GitHub link with its account, and a
// state and a login code under way.
func publishingFixture(tb testing.TB, s *kv.Store) {
	tb.Helper()
	exp := time.Date(2026, 12, 1, 12, 10, 0, 0, time.UTC)
	update(tb, s, func(tx *kv.Tx) error {
		for ref, yanked := range map[string]string{"lena/tool@1.0.0": "", "lena/tool@1.1.0": "2026-12-01T12:05:00Z"} {
			id, v, _ := strings.Cut(ref, "@")
			doc, _ := json.Marshal(map[string]any{"id": id, "version": v, "license": "proprietary"})
			if err := tx.PutAgent(ref, holon.Doc{Doc: doc, Created: tx.Now(), Published: true, Yanked: yanked}); err != nil {
				return err
			}
		}
		if err := tx.Put(holon.BucketCredentials, "lena/tool", map[string]any{"v": 1, "nonce": bytes.Repeat([]byte{7}, 12),
			"sealed": bytes.Repeat([]byte{9}, 40), "set": tx.Now()}); err != nil {
			return err
		}
		if err := tx.Put(holon.BucketUsers, "lena", map[string]any{"handle": "lena", "email": "lena@example.com",
			"github": map[string]any{"id": 101, "login": "lena"}}); err != nil {
			return err
		}
		if err := tx.Put(holon.BucketSignIn, "github/101", "lena"); err != nil {
			return err
		}
		if err := tx.Put(holon.BucketSignIn, "state/"+strings.Repeat("a", 64), map[string]any{"expires": exp}); err != nil {
			return err
		}
		return tx.Put(holon.BucketSignIn, "code/"+strings.Repeat("b", 64), map[string]any{"handle": "lena", "new": true, "expires": exp})
	})
}

// Ensure that verify checks published versions, sealed credentials and
// sign-in state, and names what is wrong.
func TestVerify_Published(t *testing.T) {
	s := openStore(t, "")
	publishingFixture(t, s)
	rep, err := backup.Verify(s)
	if err != nil {
		t.Fatal(err)
	}
	c := rep.Check(backup.CheckPublished)
	if !c.OK() || c.Covered != "2 published versions (1 yanked), 1 sealed credentials, 1 GitHub links, 2 sign-ins under way" {
		t.Fatalf("published check on a good store: %+v", c)
	}
	update(t, s, func(tx *kv.Tx) error {
		if err := tx.PutAgent("lena/other@2.0.0", holon.Doc{Doc: json.RawMessage(`{"id":"lena/other","version":"1.0.0"}`), Published: true}); err != nil {
			return err
		}
		if err := tx.Put(holon.BucketCredentials, "lena/plain", map[string]any{"token": "in-clear"}); err != nil {
			return err
		}
		if err := tx.Put(holon.BucketSignIn, "github/102", "ghost"); err != nil {
			return err
		}
		return tx.Put(holon.BucketSignIn, "code/not-a-hash", map[string]any{"handle": "lena", "expires": time.Now()})
	})
	rep, err = backup.Verify(s)
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Join(rep.Check(backup.CheckPublished).Problems, "\n")
	for _, want := range []string{
		"published version lena/other@2.0.0: its manifest is lena/other@1.0.0",
		"credential of lena/plain is not a sealed token",
		"sign-in link github/102: account ghost does not exist",
		"sign-in code code/not-a-hash: not stored by its SHA-256",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("problems lack %q:\n%s", want, got)
		}
	}
}

// Ensure that a backup carries the publishing records through a restore
// unchanged (credentials still sealed) and into PostgreSQL's own tables.
func TestBackup_PublishingRecords(t *testing.T) {
	s := openStore(t, "")
	fixture(t, s)
	publishingFixture(t, s)
	b := writeBackup(t, s)
	for _, want := range []string{`"t":"credentials","k":"lena/tool"`, `"t":"signin","k":"github/101"`, `"yanked":"2026-12-01T12:05:00Z"`} {
		if !bytes.Contains(b, []byte(want)) {
			t.Errorf("backup lacks %s", want)
		}
	}
	path := filepath.Join(t.TempDir(), "restored.db")
	if _, err := backup.Restore(bytes.NewReader(b), path, nil); err != nil {
		t.Fatal(err)
	}
	r := openStore(t, path)
	if !bytes.Equal(writeBackupRows(t, r), writeBackupRows(t, s)) {
		t.Error("the restored store's rows differ")
	}

	srv := pgtest.Start(t)
	url := srv.CreateDB(t, "holon")
	sum, err := backup.LoadPostgres(context.Background(), bytes.NewReader(b), url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if sum.Tables["credentials"] != 1 || sum.Tables["signin"] != 3 {
		t.Errorf("loaded %v", sum.Tables)
	}
	conn := srv.Connect(t, url)
	var n int
	if err := conn.QueryRow(context.Background(), `SELECT count(*) FROM agents WHERE published AND yanked IS NOT NULL`).Scan(&n); err != nil || n != 1 {
		t.Errorf("yanked published versions in PostgreSQL: %d, %v", n, err)
	}
	var handle string
	var nonceLen int
	if err := conn.QueryRow(context.Background(), `SELECT s.handle, length(c.nonce) FROM signin s, credentials c WHERE s.github_id = 101 AND c.agent = 'lena/tool'`).Scan(&handle, &nonceLen); err != nil || handle != "lena" || nonceLen != 12 {
		t.Errorf("signin and credentials rows: %q %d %v", handle, nonceLen, err)
	}
}

// writeBackupRows is a backup without its header and trailer (which carry
// the time it was taken).
func writeBackupRows(tb testing.TB, s *kv.Store) []byte {
	ls := lines(writeBackup(tb, s))
	return []byte(strings.Join(ls[1:len(ls)-1], "\n"))
}
