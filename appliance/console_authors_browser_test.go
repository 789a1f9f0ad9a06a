package appliance_test

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	cdpbrowser "github.com/chromedp/cdproto/browser"
	"github.com/chromedp/chromedp"
)

// An author in the console: signed in with the key GitHub sign-in gave,
// she connects a webhook on loopback (draft, review, a refusal beside the
// manifest, publish), sets its credential (never shown again; it reaches
// the webhook as a bearer token), and sees what a paid call earned; then
// she uploads a file, finds it listed with its expiry, and copies its
// handle.
func consoleAuthorSession(t *testing.T, browserCtx context.Context, axe []byte) {
	srv := newAuthorServer(t)
	g := newGitHubApp(t, withAuthorServer(srv))
	lena := g.author(101, "lena")
	tb := newTab(t, browserCtx, g.srv.URL, axe, "author")

	tb.open("/console/signin")
	tb.fill(`#key`, lena.humanKey)
	tb.click(`#signin-key button`)
	tb.click(`a[href="/console/authors"]`)
	if got := tb.text(`#versions-h + p`); got != "You have published no agent yet." {
		t.Errorf("a new author's page: %q", got)
	}
	tb.check("authors-empty")

	// Connect a webhook: the gateway calls it once and drafts the listing.
	tb.click(`a[href="/console/authors/connect"]`)
	tb.fill(`#hook-name`, "hooky", `#hook-endpoint`, srv.srv.URL+"/run", `#hook-input`, `{"text": "hello"}`,
		`#hook-summary`, "Echoes a <b>text</b>.", `#hook-price`, "0.05")
	tb.check("authors-connect")
	if status := tb.click(`form[action="/console/authors/connect"] button`); status != http.StatusOK {
		t.Fatalf("draft: status %d (%s)", status, tb.text("main"))
	}
	if n := len(srv.authorizations("/run")); n != 1 {
		t.Errorf("the draft called the webhook %d times, want once", n)
	}
	draft := tb.value(`#manifest`)
	if !strings.Contains(draft, "id: lena/hooky") || !strings.Contains(draft, "Echoes a <b>text</b>.") || tb.text(`[data-review]`) == "" {
		t.Fatalf("the draft to review:\n%s", draft)
	}
	if _, listed := g.app.Engine().Registry().Get("lena/hooky@0.1.0"); listed {
		t.Error("the draft was listed before it was published")
	}
	tb.check("authors-review")
	// Edited into someone else's namespace: refused, the code beside it.
	tb.fill(`#manifest`, strings.Replace(draft, "id: lena/hooky", "id: bob/hooky", 1))
	if status := tb.click(`form[action="/console/authors/publish"] button`); status != http.StatusForbidden {
		t.Errorf("publishing as bob: status %d, want 403", status)
	}
	if got := tb.text(`#manifest-error`); !strings.HasPrefix(got, "not_your_namespace: ") {
		t.Errorf("the refusal beside the manifest: %q", got)
	}
	tb.check("authors-refused")
	tb.fill(`#manifest`, draft)
	if status := tb.click(`form[action="/console/authors/publish"] button`); status != http.StatusCreated {
		t.Fatalf("publish: status %d (%s)", status, tb.text("main"))
	}
	if got := tb.text(`[data-notice]`); !strings.HasPrefix(got, "lena/hooky@0.1.0 is published") {
		t.Errorf("after publishing: %q", got)
	}
	if _, listed := g.app.Engine().Registry().Get("lena/hooky@0.1.0"); !listed {
		t.Fatal("the reviewed draft is not listed")
	}

	// The credential: set, then never shown again.
	const token = "tok-Browser7Xq2Lm9Vb4Nc8Zr1"
	tb.fill(`#cred-agent`, "hooky", `#cred-token`, token)
	tb.click(`#credential-form button`)
	if got := tb.text(`tr[data-credential="lena/hooky"] [data-state]`); !strings.HasPrefix(got, "set ") {
		t.Errorf("the credential's state: %q", got)
	}
	if strings.Contains(evalIn[string](tb, `document.documentElement.outerHTML`), token) {
		t.Error("the page shows the token")
	}
	tb.check("authors-credential")
	srv.requireToken(token)

	// A paid call, by another account: the token reaches the webhook.
	carol := g.signup("carol")
	carol.createMandate("pub", map[string]any{"budget": map[string]any{"total": "2.00"}, "allow": map[string]any{"agents": []string{"lena/*"}}})
	out := carol.human.must(200, "POST", "/v0/calls", map[string]any{"mandate": "carol/pub", "agent": "lena/hooky", "input": map[string]any{"text": "paid"}})
	if o, _ := out["output"].(map[string]any); o["echo"] != "paid" {
		t.Errorf("the paid call: %v", out)
	}
	if auths := srv.authorizations("/run"); auths[len(auths)-1] != "Bearer "+token {
		t.Errorf("the webhook got Authorization %q, want the bearer token", auths[len(auths)-1])
	}
	mine := lena.human.must(200, "GET", "/v0/me/agents", nil)
	var own, earned string
	for _, v := range mine["versions"].([]any) {
		if v := v.(map[string]any); v["ref"] == "lena/hooky@0.1.0" {
			e := v["earnings"].(map[string]any)["EUR"].(map[string]any)
			own, earned = str(e["own"])+" EUR", str(e["total"])+" EUR"
		}
	}
	tb.open("/console/authors")
	row := `tr[data-version="lena/hooky@0.1.0"] `
	if calls, o, total := tb.text(row+`[data-paid-calls]`), tb.text(row+`[data-own]`), tb.text(row+`[data-earned]`); calls != "1" || o != own || total != earned || own == " EUR" {
		t.Errorf("earnings on the page: %s paid calls, own %s, earned %s; the API says own %s, earned %s", calls, o, total, own, earned)
	}
	tb.check("authors-earnings")
	tb.click(`a[href="/console/spend"]`)
	if got := tb.text(`[data-chart="earnings-0"] tbody th`); got != "lena/hooky@0.1.0" {
		t.Errorf("the earnings chart's version: %q", got)
	}
	if got := tb.text(`[data-chart="earnings-0"] tfoot td:nth-of-type(2)`) + " EUR"; got != own {
		t.Errorf("the earnings chart's total %q, the API's own %q", got, own)
	}
	if w := evalIn[float64](tb, `document.querySelector('[data-chart="earnings-0"] svg rect.col').getBBox().width`); w <= 0 {
		t.Errorf("the version's bar is %v wide", w)
	}
	tb.check("spend-earnings")

	// A file: uploaded by the form, listed with its expiry, its handle copied.
	file := filepath.Join(t.TempDir(), "invoice.csv")
	content := []byte("item,amount\nWidgets,20.00\n")
	if err := os.WriteFile(file, content, 0o644); err != nil {
		t.Fatal(err)
	}
	tb.click(`a[href="/console/files"]`)
	if got := tb.text(`#upload-help`); !strings.Contains(got, "20 MB") {
		t.Errorf("the upload limit is not stated: %q", got)
	}
	tb.check("files-empty")
	tb.step("choose the file", chromedp.SetUploadFiles(chromedp.CSS(`#upload-file`), []string{file}))
	if status := tb.click(`#upload-form button`); status != http.StatusCreated {
		t.Fatalf("upload: status %d (%s)", status, tb.text("main"))
	}
	handle := tb.text(`[data-uploaded]`)
	if !strings.HasPrefix(handle, "holon://files/") {
		t.Fatalf("uploaded: %q", handle)
	}
	files := lena.human.must(200, "GET", "/v0/files", nil)["files"].([]any)
	if len(files) != 1 || files[0].(map[string]any)["file"] != handle || files[0].(map[string]any)["size"] != float64(len(content)) {
		t.Errorf("GET /v0/files after the upload: %v", files)
	}
	if got := tb.text(`tr[data-file="` + handle + `"] [data-expires]`); got != "2026-12-02 12:00:00Z" {
		t.Errorf("the file's expiry: %q, want 24 hours after the upload", got)
	}
	tb.check("files")
	for _, perm := range []string{"clipboard-read", "clipboard-write"} {
		if _, err := chromedp.CallBrowser(tb.ctx, cdpbrowser.SetPermission, cdpbrowser.SetPermissionParams{
			Permission: &cdpbrowser.PermissionDescriptor{Name: perm}, Setting: cdpbrowser.PermissionSettingGranted,
			Origin: g.srv.URL, BrowserContextID: chromedp.FromContext(tb.ctx).BrowserContextID,
		}); err != nil {
			t.Fatalf("grant %s: %v", perm, err)
		}
	}
	tb.step("copy the handle", chromedp.Click(chromedp.CSS(`tr[data-file="`+handle+`"] button[data-copy]`), chromedp.NodeVisible))
	if got := evalIn[string](tb, `new Promise(function (ok) {
		var n = 0, b = document.querySelector("button[data-copy]");
		(function wait() { if (b.textContent !== "Copy" || ++n > 100) ok(b.textContent); else setTimeout(wait, 20); })();
	})`); got != "Copied" {
		t.Errorf("the copy button says %q", got)
	}
	if got := evalIn[string](tb, `navigator.clipboard.readText()`); got != handle {
		t.Errorf("the clipboard holds %q, want %q", got, handle)
	}
	tb.sameOrigin()
}
