package appliance_test

import (
	"bytes"
	"io"
	"mime/multipart"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"holon.dev/holon/appliance"
)

// uploadForm posts a multipart form to /console/files: its parts in the
// order given (name, value; a name "file" is sent as a file part).
func (b *browser) uploadForm(parts ...string) (*http.Response, string) {
	b.t.Helper()
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	for i := 0; i+1 < len(parts); i += 2 {
		if parts[i] == "file" {
			w, _ := mw.CreateFormFile("file", "notes.txt")
			io.WriteString(w, parts[i+1])
			continue
		}
		mw.WriteField(parts[i], parts[i+1])
	}
	mw.Close()
	req, _ := http.NewRequest("POST", b.base+"/console/files", &body)
	req.Header.Set("Content-Type", mw.FormDataContentType())
	return b.send(req)
}

// Ensure that the author's pages act on the signed-in author's own agents
// only: another author's versions, credentials and files are neither shown
// nor changed through the console, each attempt answered with the API's
// own refusal.
func TestConsole_AuthorScope(t *testing.T) {
	srv := newAuthorServer(t)
	g := newGitHubApp(t, withAuthorServer(srv))
	lena, bob := g.author(101, "lena"), g.author(102, "bob")
	lena.human.must(200, "PUT", "/v0/agents/lena/hooky/credential", map[string]any{"token": "lena-Tok3n"})
	lena.human.must(201, "POST", "/v0/agents", pubManifest("lena/hooky", "1.0.0", proprietary, set("runtime.endpoint", srv.srv.URL+"/run")))
	lenaFile := lena.human.mustUpload("text/plain", []byte("lena's notes"))

	b := signIn(t, g.hostedApp, bob.humanKey)
	for _, page := range []string{"/console/authors", "/console/files"} {
		resp, body := b.get(page)
		if resp.StatusCode != 200 || strings.Contains(body, "lena/hooky") || strings.Contains(body, lenaFile) {
			t.Errorf("%s: %d, shows lena's agent or file", page, resp.StatusCode)
		}
	}
	for _, c := range []struct {
		path   string
		form   url.Values
		status int
		code   string
	}{
		{"/console/authors/yank", url.Values{"ref": {"lena/hooky@1.0.0"}}, 404, "not_found"},
		{"/console/authors/credential/remove", url.Values{"agent": {"lena/hooky"}}, 403, appliance.CodeNotYourNamespace},
		{"/console/authors/credential", url.Values{"agent": {"lena/hooky"}, "token": {"bob-token"}}, 403, appliance.CodeNotYourNamespace},
		{"/console/authors/credential", url.Values{"agent": {"../lena/hooky"}, "token": {"bob-token"}}, 400, "invalid_request"},
	} {
		resp, body := b.post(c.path, c.form)
		if resp.StatusCode != c.status || !strings.Contains(body, "<code>"+c.code+"</code>") {
			t.Errorf("POST %s %v: %d, want %d with %s\n%s", c.path, c.form, resp.StatusCode, c.status, c.code, body)
		}
	}
	if _, listed := g.app.Engine().Registry().Get("lena/hooky@1.0.0"); !listed {
		t.Error("bob's console yanked lena's version")
	}
	if creds := lena.human.must(200, "GET", "/v0/me/credentials", nil)["credentials"].([]any); len(creds) != 1 || creds[0].(map[string]any)["opens"] != true {
		t.Errorf("lena's credentials after bob's attempts: %v", creds)
	}
	if creds := bob.human.must(200, "GET", "/v0/me/credentials", nil)["credentials"].([]any); len(creds) != 0 {
		t.Errorf("bob sees credentials %v", creds)
	}

	// Lena's own page: her version, her credential (set, never shown).
	lb := signIn(t, g.hostedApp, lena.humanKey)
	resp, body := lb.get("/console/authors")
	if resp.StatusCode != 200 || !strings.Contains(body, `data-version="lena/hooky@1.0.0"`) || !strings.Contains(body, `data-credential="lena/hooky"`) || strings.Contains(body, "lena-Tok3n") {
		t.Errorf("lena's page: %d\n%s", resp.StatusCode, body)
	}
	resp, body = lb.post("/console/authors/yank", url.Values{"ref": {"lena/hooky@1.0.0"}})
	if _, listed := g.app.Engine().Registry().Get("lena/hooky@1.0.0"); resp.StatusCode != 200 || listed || !strings.Contains(body, "is yanked") {
		t.Errorf("lena yanks her version: %d, still listed %v", resp.StatusCode, listed)
	}
}

// Ensure that the console's upload form stores the file through POST
// /v0/files, its token checked before the file is read: a form without
// it, or with a wrong one, stores nothing; a multipart body sent to any
// other page is refused unread; a file over 20 MB is refused with the
// API's code and nothing is kept.
func TestConsole_Upload(t *testing.T) {
	fa := newFilesApp(t)
	ann := fa.signup("ann")
	b := signIn(t, fa.hostedApp, ann.humanKey)
	b.get("/console/files")
	tok := b.cookie("holon_csrf")

	for _, c := range []struct {
		name  string
		parts []string
	}{
		{"no token", []string{"file", "x"}},
		{"token after the file", []string{"file", "x", "csrf", tok}},
		{"wrong token", []string{"csrf", strings.Repeat("A", 43), "file", "x"}},
	} {
		if resp, _ := b.uploadForm(c.parts...); resp.StatusCode != http.StatusForbidden {
			t.Errorf("%s: %d, want 403", c.name, resp.StatusCode)
		}
	}
	req, _ := http.NewRequest("POST", b.base+"/console/authors/credential", strings.NewReader("--x\r\n\r\n--x--\r\n"))
	req.Header.Set("Content-Type", "multipart/form-data; boundary=x")
	if resp, _ := b.send(req); resp.StatusCode != http.StatusUnsupportedMediaType {
		t.Errorf("multipart to another page: %d, want 415", resp.StatusCode)
	}
	if resp, body := b.uploadForm("csrf", tok); resp.StatusCode != http.StatusBadRequest || !strings.Contains(body, "Choose a file") {
		t.Errorf("no file: %d", resp.StatusCode)
	}
	resp, body := b.uploadForm("csrf", tok, "file", strings.Repeat("a", appliance.MaxFileSize+1))
	if resp.StatusCode != http.StatusRequestEntityTooLarge || !strings.Contains(body, "<code>file_too_large</code>") {
		t.Errorf("a file over 20 MB: %d", resp.StatusCode)
	}
	if files := handlesOf(ann.human.must(200, "GET", "/v0/files", nil)); len(files) != 0 {
		t.Fatalf("refused uploads stored %v", files)
	}

	resp, body = b.uploadForm("csrf", tok, "file", "ann's notes")
	files := handlesOf(ann.human.must(200, "GET", "/v0/files", nil))
	if resp.StatusCode != http.StatusCreated || len(files) != 1 || !strings.Contains(body, `data-uploaded>`+files[0]+`<`) {
		t.Fatalf("upload: %d, files %v", resp.StatusCode, files)
	}
	if !strings.Contains(body, `data-file="`+files[0]+`"`) || !strings.Contains(body, "2026-12-02 09:00:00Z") {
		t.Errorf("the page does not list the file with its expiry:\n%s", body)
	}
}
