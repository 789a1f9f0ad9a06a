package bench

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"holon.dev/holon/backup/pgtest"
)

func TestLockSamples_Note(t *testing.T) {
	s := lockSamples{
		holderKey("idle in transaction", "Client/ClientRead", "SELECT gen, keys, vals FROM writer_log WHERE gen > $1"): 6,
		holderKey("active", "", "COMMIT"): 3,
		"":                                1,
		holderKey("active", "IO/WALSync", "COMMIT"): 3,
	}
	got := s.note(3)
	want := "what the server process holding the writers' lock did, 13 samples a millisecond apart in the row's blocks: " +
		"46.2% idle in transaction, waiting for Client/ClientRead: SELECT gen, keys, vals; 23.1% active, waiting for IO/WALSync: COMMIT; 23.1% active: COMMIT"
	if got != want {
		t.Errorf("note:\n got %s\nwant %s", got, want)
	}
	if got := s.note(4); !strings.HasSuffix(got, "; 7.7% no one held it") {
		t.Errorf("the samples without a holder: %s", got)
	}
}

// Ensure that the sampler sees the writers' lock's holder on a real
// PostgreSQL: a session that took the lock and waits for its client.
func TestLockHolder_SamplesTheHolder(t *testing.T) {
	url := pgtest.Start(t).CreateDB(t, "lockholder")
	ctx := context.Background()
	c, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	if _, err := c.Exec(ctx, `CREATE TABLE writer_log (gen bigint)`); err != nil {
		t.Fatal(err)
	}
	s := lockSamples{}
	h := &lockHolder{url: url}
	err = h.around(ctx, s, func() error {
		// No one holds it (long enough for the sampler's first queries on a
		// loaded machine: in one CI run it took none in 50 ms).
		time.Sleep(300 * time.Millisecond)
		if _, err := c.Exec(ctx, `BEGIN`); err != nil {
			return err
		}
		if _, err := c.Exec(ctx, `LOCK TABLE writer_log IN EXCLUSIVE MODE`); err != nil {
			return err
		}
		time.Sleep(200 * time.Millisecond)
		_, err := c.Exec(ctx, `COMMIT`)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	idle := s["idle in transaction, waiting for Client/ClientRead: LOCK TABLE writer_log IN"]
	if idle < 50 || s[""] < 10 {
		t.Errorf("samples %v: want the holder idle in transaction most of the time, and some with no holder", s)
	}
}
