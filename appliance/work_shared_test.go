package appliance_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"holon.dev/holon"
	"holon.dev/holon/backup/pgtest"
	"holon.dev/holon/kv/pg"
)

// Ensure that on two gateways sharing one PostgreSQL store each job that
// must run once (the sweeps, the expiry of approvals, the evaluation
// queue, the alerts' webhook deliveries) has one leader, and that when the
// leader dies (its store killed, its lease left to run out) the other
// takes every job over within 1.5 leases and runs it: a file that expired
// meanwhile is swept by the survivor, with no sweep asked for.
func TestWork_RunsOnceAcrossGateways(t *testing.T) {
	url := pgtest.Start(t).CreateDB(t, "jobs")
	a := newFilesApp(t, onPostgres(url))
	b := newFilesApp(t, onPostgres(url))
	idOf := func(fa *filesApp) string { return fa.app.Engine().Store().(*pg.Store).ID() }
	conn, err := pgx.Connect(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	leaders := func() map[string]string {
		t.Helper()
		rows, err := conn.Query(context.Background(), `SELECT job, gateway FROM job_leaders WHERE expires > now()`)
		if err != nil {
			t.Fatal(err)
		}
		out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) ([2]string, error) {
			var p [2]string
			return p, r.Scan(&p[0], &p[1])
		})
		if err != nil {
			t.Fatal(err)
		}
		m := map[string]string{}
		for _, p := range out {
			m[p[0]] = p[1]
		}
		return m
	}
	// The appliance's jobs, and the store's own: folding the rollups'
	// additions (kv/pg).
	jobs := []string{"expire", "evaluations", "files-sweep", "idempotency-sweep", "rate-buckets", "alert-webhooks", "rollups_fold"}
	deadline := time.Now().Add(5 * time.Second)
	for len(leaders()) < len(jobs) && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	held := leaders()
	for _, j := range jobs {
		if g := held[j]; g != idOf(a) && g != idOf(b) {
			t.Errorf("job %s is led by %q, want one of the two gateways (%v)", j, g, held)
		}
	}
	if len(held) != len(jobs) {
		t.Fatalf("jobs led: %v, want %v", held, jobs)
	}
	// The gateway leading the files' sweep dies; a file expires meanwhile.
	dead, survivor := a, b
	if held["files-sweep"] == idOf(b) {
		dead, survivor = b, a
	}
	ann := survivor.signup("ann")
	handle := ann.human.mustUpload("text/plain", []byte("swept by whoever leads"))
	a.advance(25 * time.Hour)
	b.advance(25 * time.Hour)
	dead.app.Engine().Store().(*pg.Store).Kill()
	died := time.Now()
	id := handle[len("holon://files/"):]
	for {
		gone := true
		for _, g := range leaders() {
			gone = gone && g == idOf(survivor)
		}
		st, _, _ := ann.human.raw("GET", "/v0/files", nil)
		var files int
		if err := conn.QueryRow(context.Background(), `SELECT count(*) FROM app_docs WHERE bucket = $1 AND key = $2`,
			holon.BucketFiles, "f/"+id).Scan(&files); err != nil {
			t.Fatal(err)
		}
		if files == 0 && gone && st == http.StatusOK {
			break
		}
		if time.Since(died) > 2*time.Second*3/2+time.Second {
			t.Fatalf("%v after the leader died: leaders %v, the expired file still there", time.Since(died), leaders())
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("the survivor took every job and swept the file %v after the leader died (lease 2s)", time.Since(died))
	dead.app.Close()
	dead.app = nil
}
