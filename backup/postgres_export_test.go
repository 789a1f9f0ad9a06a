package backup_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"holon.dev/holon"
	"holon.dev/holon/backup"
	"holon.dev/holon/backup/pgtest"
	"holon.dev/holon/journal"
	"holon.dev/holon/kv"
	"holon.dev/holon/kv/pg"
)

// pgBackup writes a backup of the PostgreSQL store at url.
func pgBackup(t *testing.T, url string) []byte {
	t.Helper()
	s, err := pg.Open(context.Background(), url, holon.StoreOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var buf bytes.Buffer
	if _, err := backup.Write(&buf, backup.PostgresSource(s), backup.Options{Gateway: "test", Now: func() time.Time { return t0 }}); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// Ensure that the golden backup loaded into PostgreSQL and backed up from
// the PostgreSQL store is the golden file again, byte for byte: the store
// keeps every row as the embedded store does.
func TestPostgres_GoldenRoundTrip(t *testing.T) {
	srv := pgtest.Start(t)
	want, err := os.ReadFile(goldenPath)
	if err != nil {
		t.Fatal(err)
	}
	url := srv.CreateDB(t, "golden")
	if _, err := backup.LoadPostgres(context.Background(), bytes.NewReader(want), url, nil); err != nil {
		t.Fatal(err)
	}
	if got := pgBackup(t, url); !bytes.Equal(got, want) {
		diffLines(t, got, want)
	}
}

func diffLines(t *testing.T, got, want []byte) {
	t.Helper()
	gl, wl := lines(got), lines(want)
	for i := 0; i < max(len(gl), len(wl)); i++ {
		var g, w string
		if i < len(gl) {
			g = gl[i]
		}
		if i < len(wl) {
			w = wl[i]
		}
		if g != w {
			t.Fatalf("backups differ at line %d:\n got %s\nwant %s", i+1, g, w)
		}
	}
}

// Ensure that a backup of a bbolt store restores into PostgreSQL, where the
// store serves it (a settlement chains on), and that the backup of that
// PostgreSQL store restores into bbolt: both verify, and the rows the two
// stores share are the same.
func TestPostgres_BackupBothWays(t *testing.T) {
	srv := pgtest.Start(t)
	ctx := context.Background()
	fromBolt := writeBackup(t, goldenStore(t))
	url := srv.CreateDB(t, "from_bolt")
	if _, err := backup.LoadPostgres(ctx, bytes.NewReader(fromBolt), url, nil); err != nil {
		t.Fatal(err)
	}
	s, err := pg.Open(ctx, url, holon.StoreOptions{Now: func() time.Time { return t0 }})
	if err != nil {
		t.Fatal(err)
	}
	// A second gateway on the same database, open at once: its writer
	// extends a chain of its own.
	s2, err := pg.Open(ctx, url, holon.StoreOptions{Now: func() time.Time { return t0 }})
	if err != nil {
		t.Fatal(err)
	}
	var first, second holon.JournalRow
	for _, x := range []struct {
		s   *pg.Store
		key string
		row *holon.JournalRow
	}{{s, "admin-credit:on-postgres", &first}, {s2, "admin-credit:second-gateway", &second}} {
		err = x.s.Update(ctx, func(tx holon.Tx) (err error) {
			e, _ := journal.Transfer(x.key, "external:demo-credit", "alice", amt("1.00"))
			*x.row, err = tx.AppendEntry(e)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	s.Close()
	s2.Close()
	// The second gateway's credit is alice's part 1 (the store's
	// migration 24): the backup holds her account once, as the sum.
	var parts int
	if err := srv.Connect(t, url).QueryRow(ctx, `SELECT count(*) FROM accounts WHERE name = 'alice'`).Scan(&parts); err != nil || parts != 2 {
		t.Errorf("alice's account in %d parts (%v), want 2: the test shows nothing of parts", parts, err)
	}
	if first.Prev == "" || second.Prev != "" {
		t.Errorf("the first gateway's entry follows %q, the second's %q: want the loaded chain's head, then a chain of its own", first.Prev, second.Prev)
	}
	fromPG := pgBackup(t, url)
	rep, _, err := backup.VerifyFile(bytes.NewReader(fromPG), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if !rep.OK() {
		var buf bytes.Buffer
		rep.WriteTo(&buf)
		t.Fatalf("the PostgreSQL store's backup does not verify:\n%s", buf.String())
	}
	path := filepath.Join(t.TempDir(), "restored.db")
	if _, err := backup.Restore(bytes.NewReader(fromPG), path, nil); err != nil {
		t.Fatal(err)
	}
	restored := openStore(t, path)
	if rep, err := backup.Verify(restored); err != nil || !rep.OK() {
		t.Fatalf("the bbolt store restored from PostgreSQL: %v %v", rep, err)
	}
	// The bbolt store's backup is the PostgreSQL one's, byte for byte.
	if again := writeBackup(t, restored); !bytes.Equal(again, fromPG) {
		diffLines(t, again, fromPG)
	}
	if len(lines(fromPG)) != len(lines(fromBolt))+5 { // two entries, their keys, the second chain's head
		t.Errorf("%d lines from PostgreSQL, %d from bbolt", len(lines(fromPG)), len(lines(fromBolt)))
	}
	// The bbolt store goes on with chain 0, the first gateway's, and
	// keeps the second's head: both verify.
	var row holon.JournalRow
	err = restored.Update(ctx, func(tx *kv.Tx) (err error) {
		e, _ := journal.Transfer("admin-credit:on-bbolt", "external:demo-credit", "alice", amt("1.00"))
		row, err = tx.AppendEntry(e)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if row.Prev != first.Hash {
		t.Errorf("the bbolt store's entry follows %q, want chain 0's head %q", row.Prev, first.Hash)
	}
	if rep, err := backup.Verify(restored); err != nil || !rep.OK() {
		t.Fatalf("the bbolt store restored from PostgreSQL, after an entry: %v %v", rep, err)
	}
}

// Ensure that a backup of the PostgreSQL store holds a version's earnings
// and latency once, as the sum of the parts several gateways wrote (the
// store's migration 24), in the embedded store's bytes, and that it
// restores into bbolt with the same sums.
func TestPostgres_BackupSumsParts(t *testing.T) {
	srv := pgtest.Start(t)
	ctx := context.Background()
	url := srv.CreateDB(t, "parts")
	var stores []*pg.Store
	for range 2 {
		s, err := pg.Open(ctx, url, holon.StoreOptions{})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		stores = append(stores, s)
	}
	const ref = "acme/a@1.0.0"
	for i, s := range stores {
		err := s.Update(ctx, func(tx holon.Tx) error {
			if err := tx.AddEarnings(ref, "EUR", 1, amt("0.90"), 0); err != nil {
				return err
			}
			return tx.AddLatency(ref, int64(3+100*i))
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	var parts int
	if err := srv.Connect(t, url).QueryRow(ctx, `SELECT count(*) FROM app_docs WHERE bucket = 'earnings'`).Scan(&parts); err != nil || parts != 2 {
		t.Fatalf("earnings in %d parts (%v), want 2: the test shows nothing of parts", parts, err)
	}
	var buf bytes.Buffer
	if _, err := backup.Write(&buf, backup.PostgresSource(stores[0]), backup.Options{}); err != nil {
		t.Fatal(err)
	}
	wantEarnings, _ := json.Marshal(holon.Earnings{"EUR": {PaidCalls: 2, Own: amt("1.80")}})
	lat := holon.Latency{Counts: make([]int64, len(holon.LatencyBoundsMS)+1)}
	lat.Counts[holon.LatencyBucket(3)]++
	lat.Counts[holon.LatencyBucket(103)]++
	wantLatency, _ := json.Marshal(lat)
	var got []string
	for _, l := range lines(buf.Bytes()) {
		if strings.HasPrefix(l, `{"t":"earnings"`) || strings.HasPrefix(l, `{"t":"latency"`) {
			got = append(got, l)
		}
	}
	want := []string{`{"t":"earnings","k":"` + ref + `","v":` + string(wantEarnings) + `}`, `{"t":"latency","k":"` + ref + `","v":` + string(wantLatency) + `}`}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("the backup's earnings and latency:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	path := filepath.Join(t.TempDir(), "r.db")
	if _, err := backup.Restore(bytes.NewReader(buf.Bytes()), path, nil); err != nil {
		t.Fatal(err)
	}
	err := openStore(t, path).View(func(tx *kv.Tx) error {
		e, err := tx.Earnings(ref)
		if err == nil && (e["EUR"].PaidCalls != 2 || e["EUR"].Own != amt("1.80")) {
			t.Errorf("the restored earnings %+v, want the sum", e)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}
