package appliance

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"mime"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/julienschmidt/httprouter"
	"holon.dev/holon"
	"holon.dev/holon/appliance/auth"
	"holon.dev/holon/appliance/web"
)

// The files endpoints (gateway.md §7 "Extra endpoints"):
//
//	POST /v0/files                 human or agent key; the body is the file
//	GET  /v0/files/{id}?exp&sig    no key: the signature is the authorisation
//
// On a dev gateway, which has no accounts, an upload names the mandate
// whose issuer owns the file: POST /v0/files?mandate=alice/bookkeeping-q4.

// routeFiles registers the files endpoints.
func (a *api) routeFiles(files *fileStore) {
	a.files = files
	a.handle("POST", "/v0/files", auth.Human|auth.Agent, a.uploadFile)
	a.handle("GET", "/v0/files", auth.Human|auth.Agent, a.listFiles)
	a.router.GET("/v0/files/:id", a.downloadFile)
	a.router.HEAD("/v0/files/:id", a.downloadFile)
}

// bodyLimit is the most a request body may hold: a file upload's limit is
// the file limit (and one byte more, so that the upload itself says what
// was too large); every other body's is web.MaxBody.
func bodyLimit(r *http.Request) int64 {
	if r.Method == http.MethodPost && r.URL.Path == "/v0/files" {
		return MaxFileSize + 1
	}
	if r.Method == http.MethodPost && r.URL.Path == consoleUploadPath {
		return MaxFileSize + consoleUploadOverhead
	}
	return web.MaxBody
}

// fileAnswer is the answer of POST /v0/files.
type fileAnswer struct {
	File        string    `json:"file"`
	Size        int64     `json:"size"`
	ContentType string    `json:"content_type"`
	SHA256      string    `json:"sha256"`
	Expires     time.Time `json:"expires"`
}

func (a *api) uploadFile(w http.ResponseWriter, r *http.Request, _ httprouter.Params, p *auth.Principal) {
	owner := p.Account
	if p.Kind == auth.KindDev {
		id := r.URL.Query().Get("mandate")
		if id == "" {
			a.fail(w, r, holon.Errorf(holon.CodeInvalidRequest,
				"this dev gateway has no accounts: name the mandate whose issuer owns the file, POST /v0/files?mandate=<id>"))
			return
		}
		st, err := a.engine.Mandate(id)
		if err != nil {
			a.fail(w, r, err)
			return
		}
		owner = st.Mandate.Issuer
	}
	if owner == PlatformFileOwner {
		a.fail(w, r, holon.Errorf(web.CodeForbidden, "platform files are stored by the evaluation runner, not uploaded"))
		return
	}
	ct := strings.TrimSpace(r.Header.Get("Content-Type"))
	if ct == "" {
		ct = "application/octet-stream"
	}
	mt, _, err := mime.ParseMediaType(ct)
	switch {
	case err != nil || len(ct) > 255:
		a.fail(w, r, holon.Errorf(holon.CodeInvalidRequest, "Content-Type %q is not a media type such as application/pdf", ct))
		return
	case mt == "multipart/form-data":
		a.fail(w, r, holon.Errorf(holon.CodeInvalidRequest,
			"send the file itself as the body (curl --data-binary @file -H 'Content-Type: …'), not a form: there is no multipart upload"))
		return
	}
	rec, err := a.files.put(r.Context(), owner, ct, r.ContentLength, r.Body)
	var ue *uploadError
	if errors.As(err, &ue) {
		web.Error(w, ue.status, ue.err)
		return
	}
	if err != nil {
		a.fail(w, r, err)
		return
	}
	web.JSON(w, http.StatusCreated, fileAnswer{File: rec.handle(), Size: rec.Size, ContentType: rec.ContentType, SHA256: rec.SHA256, Expires: *rec.Expires})
}

// downloadFile serves a file through a signed link: as an attachment, with
// nosniff and a sandboxing Content-Security-Policy, so that a link cannot
// run anything in a browser; Range requests are answered.
func (a *api) downloadFile(w http.ResponseWriter, r *http.Request, ps httprouter.Params) {
	id := ps.ByName("id")
	q := r.URL.Query()
	if err := a.files.links.verify(id, q.Get("exp"), q.Get("sig"), a.files.now()); err != nil {
		web.Error(w, http.StatusForbidden, err)
		return
	}
	rec, ok, err := a.files.record(id)
	if err == nil && (!ok || !rec.Live(a.files.now())) {
		err = web.NotFound("file %s is gone: files are deleted 24 hours after their upload", id)
	}
	if err != nil {
		a.fail(w, r, err)
		return
	}
	f, err := os.Open(a.files.blobPath(rec.SHA256))
	if err != nil {
		a.fail(w, r, err)
		return
	}
	defer f.Close()
	h := w.Header()
	h.Set("Content-Type", rec.ContentType)
	h.Set("Content-Disposition", `attachment; filename="`+rec.ID+`"`)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Content-Security-Policy", "sandbox; default-src 'none'; frame-ancestors 'none'")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cache-Control", "private, no-store")
	h.Set("ETag", `"`+rec.SHA256+`"`)
	http.ServeContent(w, r, "", rec.Created, f)
}

// linkSigner signs and checks download links: an HMAC-SHA256, under a key
// derived from HOLON_FILE_SECRET, of the file's id and the link's expiry.
// Changing either breaks the signature.
type linkSigner struct {
	key []byte
}

func (l *linkSigner) mac(id, exp string) []byte {
	m := hmac.New(sha256.New, l.key)
	m.Write([]byte("holon file link v1\x00"))
	m.Write([]byte(id))
	m.Write([]byte{0})
	m.Write([]byte(exp))
	return m.Sum(nil)
}

// path is the signed path of a link to file id, valid until exp.
func (l *linkSigner) path(id string, exp time.Time) string {
	e := expiresString(exp)
	return "/v0/files/" + id + "?exp=" + e + "&sig=" + base64.RawURLEncoding.EncodeToString(l.mac(id, e))
}

// verify checks a link's signature in constant time (the MAC is computed
// and compared whatever the parameters look like), then its expiry.
func (l *linkSigner) verify(id, exp, sig string, now time.Time) error {
	want := l.mac(id, exp)
	got, decErr := base64.RawURLEncoding.DecodeString(sig)
	if len(got) != len(want) {
		got = make([]byte, len(want))
	}
	match := hmac.Equal(want, got) && decErr == nil
	if !match {
		return holon.Errorf(CodeInvalidLink, "this link's signature does not match: use the url the gateway gave, unchanged")
	}
	t, err := strconv.ParseInt(exp, 10, 64)
	if err != nil || !now.Before(time.Unix(t, 0)) {
		return holon.Errorf(CodeInvalidLink, "this link expired at %s: links live 15 minutes, the next call gets a new one",
			time.Unix(t, 0).UTC().Format(time.RFC3339))
	}
	return nil
}
