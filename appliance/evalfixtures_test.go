package appliance_test

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"holon.dev/holon"
	"holon.dev/holon/appliance"
	"holon.dev/holon/appliance/files"
	"holon.dev/holon/backup"
	"holon.dev/holon/kv"
)

// fixtureSuite is an operator's private data.profile.csv suite whose two
// cases read fixture files: a public one, and a hidden one below a folder.
const fixtureSuite = `
capability: data.profile.csv
cases:
  - id: members-file
    public: true
    input: { file: "holon://files/eval/members.csv" }
    expect:
      output_contains: { rows: 2, columns: [{ name: name, type: string }, { name: age, type: integer, min: 36, max: 41 }] }
  - id: holdout-secret-5
    public: false
    input: { file: "holon://files/eval/holdout/zebra.csv" }
    expect:
      output_contains: { rows: 1, columns: [{ name: zebra-holdout, type: integer, min: 7 }] }
`

var (
	membersCSV = []byte("name,age\nAda,36\nGrace,41\n")
	zebraCSV   = []byte("zebra-holdout\n7\n")
)

// writeSuite writes a private suite directory: suite.yaml and its files.
func writeSuite(t *testing.T, capability, suite string, files map[string][]byte) string {
	t.Helper()
	dir := t.TempDir()
	for name, b := range map[string][]byte{"suite.yaml": []byte(suite)} {
		files[name] = b
	}
	for name, b := range files {
		p := filepath.Join(dir, capability, name)
		if name != "suite.yaml" {
			p = filepath.Join(dir, capability, "files", name)
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// Ensure that evaluation fixtures are platform files (evals.md, files.md):
// csv-profile, evaluated on cases that read fixture files (one public, one
// hidden), reads them and passes, in process and as an MCP agent on
// loopback downloading through its signed links; a caller who passes a fixture's
// handle in a call gets file_not_found, unbilled, while an upload of the
// same bytes of its own works; the catalogue shows nothing of the hidden
// case; and restarts store the fixtures again under the same handles,
// without a second record.
func TestEvaluate_FixturesArePlatformFiles(t *testing.T) {
	private := writeSuite(t, "data.profile.csv", fixtureSuite, map[string][]byte{"members.csv": membersCSV, "holdout/zebra.csv": zebraCSV})
	fa := newFilesApp(t, withRemoteAgents(t), func(c *appliance.Config) { c.PrivateEvals = private })
	ta := fa.hostedApp
	if err := ta.app.WaitEvaluations(t.Context()); err != nil {
		t.Fatal(err)
	}
	raw := ta.anonymous().mustRaw(http.StatusOK, "GET", "/v0/catalog?q=csv-profile")
	assertNoHidden(t, "catalogue", raw)
	if strings.Contains(string(raw), "holon://files/") {
		t.Errorf("the catalogue shows a fixture handle: %s", raw)
	}
	// The shipped dev agent reads the fixtures in process; its MCP twin on
	// an agent host downloads them through the signed links of
	// _meta["holon/files"].
	evaluated := map[string]any{}
	for _, a := range decodeObject(t, raw)["agents"].([]any) {
		e := a.(map[string]any)
		evaluated[e["id"].(string)] = e["measured"].(map[string]any)["evaluated"]
	}
	for _, id := range []string{"holon-labs/csv-profile", "test-lab/csv-profile"} {
		if got := evaluated[id]; got != "1/1 public, 1/1 hidden" {
			t.Errorf("%s evaluated %v on its fixture files, want 1/1 public, 1/1 hidden", id, got)
		}
	}

	// Content-addressed: the same bytes and type are the file stored at start-up.
	handle, err := ta.app.PutPlatformFile(context.Background(), "text/csv", strings.NewReader(string(zebraCSV)))
	if err != nil {
		t.Fatal(err)
	}
	bob := ta.signup("bob")
	bob.createMandate("csv", map[string]any{"budget": map[string]any{"total": "1.00"}, "allow": map[string]any{"agents": []string{"holon-labs/*"}}})
	st, out := bob.human.callWith("bob/csv", "holon-labs/csv-profile", map[string]any{"file": handle})
	if st != http.StatusNotFound || errorCode(out) != "file_not_found" || receiptOf(out)["billed"] != false {
		t.Errorf("a caller passing a fixture's handle: %d %v, want 404 file_not_found unbilled", st, out)
	}
	if strings.Contains(str(out), "zebra") {
		t.Errorf("the refusal shows the fixture: %v", out)
	}
	own := bob.human.mustUpload("text/csv", zebraCSV)
	st, out = bob.human.callWith("bob/csv", "holon-labs/csv-profile", map[string]any{"file": own})
	if o, _ := out["output"].(map[string]any); st != http.StatusOK || o["rows"] != float64(1) {
		t.Errorf("the same bytes uploaded by bob: %d %v", st, out)
	}

	ta.restart()
	again, err := ta.app.PutPlatformFile(context.Background(), "text/csv", strings.NewReader(string(zebraCSV)))
	if err != nil || again != handle {
		t.Errorf("after a restart the fixture is %s (%v), want %s", again, err, handle)
	}
	ta.restart()
	if err := ta.app.WaitEvaluations(t.Context()); err != nil {
		t.Fatal(err)
	}
	ta.shutdown(true)
	s, err := kv.OpenStore(ta.cfg.DB, holon.StoreOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	platform := 0
	if err := s.View(func(tx holon.Tx) error {
		return tx.ForEach(holon.BucketFiles, "f/", func(_ string, raw json.RawMessage) (bool, error) {
			var rec struct{ Owner string }
			if err := json.Unmarshal(raw, &rec); err != nil {
				return false, err
			}
			if rec.Owner == files.PlatformFileOwner {
				platform++
			}
			return true, nil
		})
	}); err != nil {
		t.Fatal(err)
	}
	if platform != 2 {
		t.Errorf("%d platform file records after three starts, want 2 (one per fixture)", platform)
	}
}

// Ensure that a suite naming a fixture it does not have stops the gateway
// with a message naming the case and the missing file.
func TestEvaluate_MissingFixture(t *testing.T) {
	private := writeSuite(t, "data.profile.csv", fixtureSuite, map[string][]byte{"members.csv": membersCSV})
	_, err := appliance.Open(t.Context(), appliance.Config{OpenStore: kv.OpenStore, Backup: backup.StoreHandler, DB: filepath.Join(t.TempDir(), "h.db"), Registry: []string{"agents"}, NoSync: true, PrivateEvals: private})
	if err == nil || !strings.Contains(err.Error(), "holdout-secret-5") || !strings.Contains(err.Error(), "no file holdout/zebra.csv in data.profile.csv/files/") {
		t.Errorf("a suite with a missing fixture: %v", err)
	}
}

// Ensure that a restart finds the fixtures an earlier start stored by their
// content-derived ids and writes no byte for them, so a gateway whose disk
// is full still starts (holon drill faults found a full disk stopping the
// start here). An upload goes through <db>.files/tmp, so a write there
// moves that directory's modification time.
func TestEvaluate_FixturesFoundWithoutWriting(t *testing.T) {
	ta := newFilesApp(t).hostedApp
	ta.shutdown(true)
	tmp := filepath.Join(ta.cfg.DB+".files", "tmp")
	past := time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)
	if err := os.Chtimes(tmp, past, past); err != nil {
		t.Fatal(err)
	}
	ta.open()
	if fi, err := os.Stat(tmp); err != nil || !fi.ModTime().Equal(past) {
		t.Fatalf("the restart wrote into %s (modified %v, %v): the fixtures were stored again", tmp, fi.ModTime(), err)
	}
	// The check can fail: a new platform file does move it.
	if _, err := ta.app.PutPlatformFile(context.Background(), "text/plain", strings.NewReader("a fixture never stored")); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(tmp); err != nil || fi.ModTime().Equal(past) {
		t.Errorf("storing a new platform file left %s unmodified (%v): the check above proves nothing", tmp, err)
	}
}
