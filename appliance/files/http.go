package files

import (
	"log/slog"
	"mime"
	"net/http"
	"strings"
	"time"

	"github.com/julienschmidt/httprouter"
	"holon.dev/holon"
	"holon.dev/holon/appliance/auth"
	"holon.dev/holon/appliance/web"
	"holon.dev/holon/gateway"
)

// The files endpoints (gateway.md §7 "Extra endpoints"):
//
//	POST /v0/files                 human or agent key; the body is the file
//	GET  /v0/files/{id}?exp&sig    no key: the signature is the authorisation
//
// On a dev gateway, which has no accounts, an upload names the mandate
// whose issuer owns the file: POST /v0/files?mandate=alice/bookkeeping-q4.

// handlers serve the files endpoints.
type handlers struct {
	files  *Store
	engine *gateway.Engine
	log    *slog.Logger
}

// Mount registers the files endpoints; engine finds a dev upload's
// mandate.
func (s *Store) Mount(m *auth.Mount, engine *gateway.Engine) {
	h := &handlers{files: s, engine: engine, log: s.log}
	m.Handle("POST", "/v0/files", auth.Human|auth.Agent, h.upload)
	m.Handle("GET", "/v0/files", auth.Human|auth.Agent, h.list)
	m.Router.GET("/v0/files/:id", h.download)
	m.Router.HEAD("/v0/files/:id", h.download)
}

func (h *handlers) fail(w http.ResponseWriter, r *http.Request, err error) {
	web.Fail(h.log, w, r, err)
}

// fileAnswer is the answer of POST /v0/files.
type fileAnswer struct {
	File        string    `json:"file"`
	Size        int64     `json:"size"`
	ContentType string    `json:"content_type"`
	SHA256      string    `json:"sha256"`
	Expires     time.Time `json:"expires"`
}

func (h *handlers) upload(w http.ResponseWriter, r *http.Request, _ httprouter.Params, p *auth.Principal) {
	owner := p.Account
	if p.Kind == auth.KindDev {
		id := r.URL.Query().Get("mandate")
		if id == "" {
			h.fail(w, r, holon.Errorf(holon.CodeInvalidRequest,
				"this dev gateway has no accounts: name the mandate whose issuer owns the file, POST /v0/files?mandate=<id>"))
			return
		}
		st, err := h.engine.Mandate(id)
		if err != nil {
			h.fail(w, r, err)
			return
		}
		owner = st.Mandate.Issuer
	}
	if owner == PlatformFileOwner {
		h.fail(w, r, holon.Errorf(web.CodeForbidden, "platform files are stored by the evaluation runner, not uploaded"))
		return
	}
	ct := strings.TrimSpace(r.Header.Get("Content-Type"))
	if ct == "" {
		ct = "application/octet-stream"
	}
	mt, _, err := mime.ParseMediaType(ct)
	switch {
	case err != nil || len(ct) > 255:
		h.fail(w, r, holon.Errorf(holon.CodeInvalidRequest, "Content-Type %q is not a media type such as application/pdf", ct))
		return
	case mt == "multipart/form-data":
		h.fail(w, r, holon.Errorf(holon.CodeInvalidRequest,
			"send the file itself as the body (curl --data-binary @file -H 'Content-Type: …'), not a form: there is no multipart upload"))
		return
	}
	rec, err := h.files.Put(r.Context(), owner, ct, r.ContentLength, r.Body)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	web.JSON(w, http.StatusCreated, fileAnswer{File: rec.Handle(), Size: rec.Size, ContentType: rec.ContentType, SHA256: rec.SHA256, Expires: *rec.Expires})
}

// download serves a file through a signed link: as an attachment, with
// nosniff and a sandboxing Content-Security-Policy, so that a link cannot
// run anything in a browser; Range requests are answered.
func (h *handlers) download(w http.ResponseWriter, r *http.Request, ps httprouter.Params) {
	id := ps.ByName("id")
	q := r.URL.Query()
	if err := h.files.links.Verify(id, q.Get("exp"), q.Get("sig"), h.files.now()); err != nil {
		h.fail(w, r, err)
		return
	}
	rec, ok, err := h.files.Lookup(id)
	if err == nil && (!ok || !rec.Live(h.files.now())) {
		err = web.NotFound("file %s is gone: files are deleted 24 hours after their upload", id)
	}
	if err != nil {
		h.fail(w, r, err)
		return
	}
	f, err := h.files.open(r.Context(), rec.SHA256)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	defer f.Close()
	hd := w.Header()
	hd.Set("Content-Type", rec.ContentType)
	hd.Set("Content-Disposition", `attachment; filename="`+rec.ID+`"`)
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("Content-Security-Policy", "sandbox; default-src 'none'; frame-ancestors 'none'")
	hd.Set("Referrer-Policy", "no-referrer")
	hd.Set("Cache-Control", "private, no-store")
	hd.Set("ETag", `"`+rec.SHA256+`"`)
	http.ServeContent(w, r, "", rec.Created, f)
}
