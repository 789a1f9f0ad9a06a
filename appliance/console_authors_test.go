package appliance_test

import (
	"bytes"
	"io"
	"mime/multipart"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"holon.dev/holon/appliance/files"
	"holon.dev/holon/appliance/publishing"
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
		{"/console/authors/credential/remove", url.Values{"agent": {"lena/hooky"}}, 403, publishing.CodeNotYourNamespace},
		{"/console/authors/credential", url.Values{"agent": {"lena/hooky"}, "token": {"bob-token"}}, 403, publishing.CodeNotYourNamespace},
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
	resp, body := b.uploadForm("csrf", tok, "file", strings.Repeat("a", files.MaxFileSize+1))
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

// Ensure that a manifest pasted in the console is published as POST
// /v0/agents would publish it, JSON and YAML alike, and that the server's
// refusals (an invalid manifest with its field, a version taken) come
// back beside the form with their code, the text as typed kept.
func TestConsole_PublishManifest(t *testing.T) {
	srv := newAuthorServer(t)
	g := newGitHubApp(t, withAuthorServer(srv))
	lena := g.author(101, "lena")
	b := signIn(t, g.hostedApp, lena.humanKey)
	endpoint := srv.srv.URL + "/run"

	asJSON := string(mustJSON(t, pubManifest("lena/jsonic", "1.0.0", proprietary, set("runtime.endpoint", endpoint))))
	yamlDoc := `id: lena/yamlic
version: 2.0.0
summary: "Pasted as <YAML>."
license: proprietary
interface:
  input: {type: object}
  output: {type: object}
pricing: {model: free}
runtime: {kind: webhook, endpoint: "` + endpoint + `"}
`
	for _, c := range []struct {
		name, manifest, ref string
		status              int
		code                string
	}{
		{"json", asJSON, "lena/jsonic@1.0.0", 201, ""},
		{"yaml", yamlDoc, "lena/yamlic@2.0.0", 201, ""},
		{"the same version again", yamlDoc, "", 409, publishing.CodeVersionExists},
		{"no runtime", strings.Replace(yamlDoc, "runtime:", "#", 1), "", 400, "invalid_manifest"},
		{"not a document", "{not json", "", 400, "invalid_manifest"},
	} {
		resp, body := b.post("/console/authors/publish", url.Values{"manifest": {c.manifest}})
		if resp.StatusCode != c.status {
			t.Errorf("%s: %d, want %d\n%s", c.name, resp.StatusCode, c.status, body)
			continue
		}
		if c.ref != "" {
			if _, listed := g.app.Engine().Registry().Get(c.ref); !listed || !strings.Contains(body, c.ref+" is published") {
				t.Errorf("%s: %s listed %v", c.name, c.ref, listed)
			}
			continue
		}
		if !strings.Contains(body, `id="manifest-error" class="error" role="alert" data-error><code>`+c.code+`</code>`) {
			t.Errorf("%s: no %s beside the manifest\n%s", c.name, c.code, body)
		}
		if !strings.Contains(body, "Pasted as &lt;YAML&gt;.") && c.manifest != "{not json" {
			t.Errorf("%s: the manifest as typed is not kept (escaped) in the form", c.name)
		}
	}
	if resp, body := b.post("/console/authors/publish", url.Values{"manifest": {strings.Replace(yamlDoc, "2.0.0", "2.1.0", 1)}}); resp.StatusCode != 201 || !strings.Contains(body, "No endpoint credential is set") {
		t.Errorf("without a credential the notice does not say so: %d", resp.StatusCode)
	}
}

// Ensure that a dev gateway's console uploads a file for the issuer of a
// chosen mandate and lists every owner's live files, and that its author
// pages say publishing is for hosted gateways.
func TestConsole_DevFiles(t *testing.T) {
	ta := newTestApp(t, "", nil)
	b := newBrowser(t, ta.srv.URL)
	resp, body := b.get("/console/files")
	if resp.StatusCode != 200 || !strings.Contains(body, `<option value="alice/bookkeeping-q4"`) {
		t.Fatalf("dev files page: %d\n%s", resp.StatusCode, body)
	}
	resp, body = b.uploadForm("csrf", b.cookie("holon_csrf"), "mandate", "alice/bookkeeping-q4", "file", "alice's invoice")
	if resp.StatusCode != http.StatusCreated || !strings.Contains(body, `data-label="owner">alice<`) {
		t.Errorf("dev upload: %d\n%s", resp.StatusCode, body)
	}
	if resp, _ := b.uploadForm("csrf", b.cookie("holon_csrf"), "mandate", "nobody/none", "file", "x"); resp.StatusCode != http.StatusNotFound {
		t.Errorf("an upload for an unknown mandate: %d, want 404", resp.StatusCode)
	}
	if resp, body := b.get("/console/authors"); resp.StatusCode != http.StatusNotFound || !strings.Contains(body, "Publishing is for authors") {
		t.Errorf("dev authors page: %d", resp.StatusCode)
	}
}
