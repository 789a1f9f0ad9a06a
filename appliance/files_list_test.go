package appliance_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"testing"
	"time"

	"holon.dev/holon"
)

// handlesOf lists the handles of a GET /v0/files page.
func handlesOf(out map[string]any) []string {
	var hs []string
	files, _ := out["files"].([]any)
	for _, f := range files {
		hs = append(hs, str(f.(map[string]any)["file"]))
	}
	return hs
}

// Ensure that GET /v0/files lists the caller's live files only (another
// account's are never seen, through any key or cursor), soonest to expire
// first, a page at a time; that an expired file is not listed even before
// the sweeper runs; and that a sweep takes it out of the index.
func TestFiles_List(t *testing.T) {
	fa := newFilesApp(t)
	ann, bob := fa.signup("ann"), fa.signup("bob")
	var want []string
	for i, body := range []string{"one", "two", "three"} {
		if i > 0 {
			fa.advance(time.Minute) // 09:00, 09:01, 09:02
		}
		want = append(want, ann.human.mustUpload("text/plain", []byte(body)))
	}
	bobFile := bob.agent.mustUpload("application/pdf", []byte("%PDF-1.7 bob"))

	out := ann.human.must(200, "GET", "/v0/files", nil)
	if got := handlesOf(out); len(got) != 3 || got[0] != want[0] || out["next"] != "" {
		t.Fatalf("ann's files: %v (next %q), want %v, the first uploaded first", got, out["next"], want)
	}
	first := out["files"].([]any)[0].(map[string]any)
	if first["owner"] != "ann" || first["size"] != float64(3) || first["content_type"] != "text/plain" ||
		first["expires"] != "2026-12-02T09:00:00Z" || first["created"] != "2026-12-01T09:00:00Z" {
		t.Errorf("a listed file: %v", first)
	}
	if got := handlesOf(ann.agent.must(200, "GET", "/v0/files", nil)); len(got) != 3 {
		t.Errorf("ann's agent key sees %v, want the account's 3 files", got)
	}
	if got := handlesOf(bob.human.must(200, "GET", "/v0/files", nil)); len(got) != 1 || got[0] != bobFile {
		t.Errorf("bob's files: %v, want only %s", got, bobFile)
	}

	// Pages.
	page1 := ann.human.must(200, "GET", "/v0/files?limit=2", nil)
	next := str(page1["next"])
	page2 := ann.human.must(200, "GET", "/v0/files?limit=2&after="+url.QueryEscape(next), nil)
	if got := append(handlesOf(page1), handlesOf(page2)...); len(got) != 3 || got[2] != want[2] || next == "" || page2["next"] != "" {
		t.Errorf("pages: %v then %v (next %q, %q)", handlesOf(page1), handlesOf(page2), next, page2["next"])
	}
	// Bob's cursor, or a made-up one, does not open ann's pages to bob.
	for _, after := range []string{next, "ann/", "../ann/x"} {
		if st, out := bob.human.do("GET", "/v0/files?after="+url.QueryEscape(after), nil); st != http.StatusBadRequest || errorCode(out) != "invalid_request" {
			t.Errorf("bob with after=%q: %d %v", after, st, out)
		}
	}
	for _, q := range []string{"limit=0", "limit=201", "limit=x"} {
		if st, out := ann.human.do("GET", "/v0/files?"+q, nil); st != http.StatusBadRequest || errorCode(out) != "invalid_request" {
			t.Errorf("%s: %d %v", q, st, out)
		}
	}
	if st, _ := fa.anonymous().do("GET", "/v0/files", nil); st != http.StatusUnauthorized {
		t.Errorf("no key: %d", st)
	}
	if st, _ := fa.admin().do("GET", "/v0/files", nil); st != http.StatusForbidden {
		t.Errorf("the admin key: %d (files are an account's)", st)
	}

	// The first file expires (at 09:00); the others a minute apart after it.
	fa.advance(24*time.Hour - 90*time.Second)
	if got := handlesOf(ann.human.must(200, "GET", "/v0/files", nil)); len(got) != 2 || got[0] != want[1] {
		t.Errorf("after the first expired, before a sweep: %v", got)
	}
	fa.advance(2 * time.Minute)
	if n, err := fa.app.SweepFiles(context.Background()); err != nil || n != 4 {
		t.Fatalf("sweep: %d %v", n, err)
	}
	if got := handlesOf(ann.human.must(200, "GET", "/v0/files", nil)); len(got) != 0 {
		t.Errorf("after the sweep: %v", got)
	}
	if keys := fileIndexKeys(t, fa); len(keys) != 0 {
		t.Errorf("the owner index keeps %v after the sweep", keys)
	}
}

// fileIndexKeys are the owner index's rows in the store.
func fileIndexKeys(t *testing.T, fa *filesApp) []string {
	t.Helper()
	var keys []string
	err := fa.app.Engine().Store().View(func(tx holon.Tx) error {
		return tx.ForEach(holon.BucketFiles, "o/", func(key string, _ json.RawMessage) (bool, error) {
			keys = append(keys, key)
			return true, nil
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	return keys
}
