package appliance_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"holon.dev/holon"
	"holon.dev/holon/appliance"
	"holon.dev/holon/appliance/files"
	"holon.dev/holon/backup/pgtest"
	"holon.dev/holon/kv/pg"
)

// onPostgres opens the gateway on the PostgreSQL database at url, as
// holon serve --store does.
func onPostgres(url string) func(*appliance.Config) {
	return func(c *appliance.Config) {
		c.OpenStore = func(_ string, opts holon.StoreOptions) (holon.Store, error) {
			return pg.OpenWith(context.Background(), url, opts, pg.Options{Lease: 2 * time.Second})
		}
	}
}

// Ensure that on one PostgreSQL store a file uploaded through one gateway
// is read through another: handed to a call there (its agent reads the
// bytes), and through a signed link the first gateway signed, served by
// the second (ranges included: the bytes span several chunks); that a
// sweep on the second deletes it for both; and that bytes uploaded twice
// through two gateways are kept once.
func TestFiles_SharedAcrossGateways(t *testing.T) {
	url := pgtest.Start(t).CreateDB(t, "files")
	hook := newHookRecorder(t)
	a := newFilesApp(t, withHook(t, hook), onPostgres(url))
	b := newFilesApp(t, withHook(t, hook), onPostgres(url))
	ann := a.signup("ann")
	mandate := filesMandate(ann)
	onB := ann.human
	onB.ta = b.hostedApp

	// Text over three chunks of the store (1 MiB each), as a table.
	var doc bytes.Buffer
	for i := 0; doc.Len() < 2*pg.ChunkSize+1000; i++ {
		doc.WriteString("widget " + itoa(int64(i)) + ", 2, 3.00\n")
	}
	handle := ann.human.mustUpload("text/plain", doc.Bytes())
	status, out := onB.callWith(mandate, "holon-labs/text-tables", map[string]any{"file": handle})
	output, _ := out["output"].(map[string]any)
	rows, _ := output["rows"].([]any)
	if status != http.StatusOK || len(rows) != strings.Count(doc.String(), "\n") {
		t.Fatalf("the call on the other gateway: %d, %d rows of %d (%v)", status, len(rows), strings.Count(doc.String(), "\n"), out["error"])
	}

	// A link the first gateway signed, opened on the second.
	if status, out := ann.human.callWith(mandate, "test-lab/hook", map[string]any{"doc": handle}); status != http.StatusOK {
		t.Fatalf("hook call: %d %v", status, out)
	}
	link := hook.last()[handle]
	if !strings.HasPrefix(link.URL, a.cfg.PublicURL+"/") {
		t.Fatalf("link %q is not the first gateway's", link.URL)
	}
	onOther := b.cfg.PublicURL + strings.TrimPrefix(link.URL, a.cfg.PublicURL)
	get := func(rng string) (int, []byte) {
		req, _ := http.NewRequest("GET", onOther, nil)
		if rng != "" {
			req.Header.Set("Range", rng)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, body
	}
	if code, body := get(""); code != http.StatusOK || !bytes.Equal(body, doc.Bytes()) {
		t.Errorf("the link on the other gateway: %d, %d bytes of %d", code, len(body), doc.Len())
	}
	from := int64(pg.ChunkSize - 10)
	to := int64(2*pg.ChunkSize + 10)
	if code, body := get("bytes=" + itoa(from) + "-" + itoa(to)); code != http.StatusPartialContent ||
		!bytes.Equal(body, doc.Bytes()[from:to+1]) {
		t.Errorf("a range over three chunks on the other gateway: %d, %d bytes", code, len(body))
	}

	// The same bytes through the second gateway: one blob, two records.
	again := onB.mustUpload("text/plain", doc.Bytes())
	if again == handle {
		t.Fatalf("two uploads, one handle %s", handle)
	}
	if n := blobRows(t, url); n != 1 {
		t.Errorf("the same bytes uploaded twice: %d blobs stored, want 1", n)
	}
	// 24 hours later a sweep on the second deletes both, for both.
	a.advance(25 * time.Hour)
	b.advance(25 * time.Hour)
	if n, err := b.app.SweepFiles(context.Background()); err != nil || n != 2 {
		t.Fatalf("sweep: %d %v, want 2", n, err)
	}
	if n := blobRows(t, url); n != 0 {
		t.Errorf("after the sweep: %d blobs left", n)
	}
	if code, _ := get(""); code == http.StatusOK {
		t.Errorf("a swept file's link still serves")
	}
}

// blobRows counts the stored blobs on url, leaving out the shipped
// evaluation fixtures.
func blobRows(t *testing.T, url string) int {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var n int
	if err := conn.QueryRow(context.Background(), `SELECT count(*) FROM blobs b WHERE NOT EXISTS
		(SELECT 1 FROM app_docs d WHERE d.bucket = $2 AND d.key LIKE 'f/%' AND d.doc->>'owner' = $1 AND d.doc->>'sha256' = b.sha256)`,
		files.PlatformFileOwner, holon.BucketFiles).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}
