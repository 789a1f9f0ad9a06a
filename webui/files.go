package webui

import (
	"errors"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// MaxUpload is the most one file may hold (gateway.md §7 "Files"): the
// page says it, its script checks it before sending, the gateway enforces
// it while it reads.
const MaxUpload = 20 << 20

// fileItem is a file as GET /v0/files lists it.
type fileItem struct {
	File        string    `json:"file"`
	Owner       string    `json:"owner"`
	Size        int64     `json:"size"`
	ContentType string    `json:"content_type"`
	SHA256      string    `json:"sha256"`
	Created     time.Time `json:"created"`
	Expires     time.Time `json:"expires"`
}

type filesPage struct {
	Files    []fileItem
	Next     string
	MaxBytes int64
	// Mandates are a dev gateway's (an upload there names the mandate
	// whose issuer owns the file).
	Mandates []string
	Mandate  string
	// Uploaded is the handle just stored; Error the gateway's refusal.
	Uploaded  string
	Error     string
	ErrorCode string
}

// fileList is the account's live files, soonest to expire first, and
// the upload form.
func (c *Console) fileList(w http.ResponseWriter, r *http.Request, v Viewer) {
	c.showFiles(w, r, v, filesPage{}, http.StatusOK)
}

func (c *Console) showFiles(w http.ResponseWriter, r *http.Request, v Viewer, p filesPage, status int) {
	p.MaxBytes = MaxUpload
	q := url.Values{"limit": {"50"}}
	if after := r.URL.Query().Get("after"); after != "" && r.Method == http.MethodGet {
		q.Set("after", after)
	}
	var ans struct {
		Files []fileItem `json:"files"`
		Next  string     `json:"next"`
	}
	if err := c.b.Do(r, "GET", "/v0/files?"+q.Encode(), nil, &ans); err != nil {
		c.fail(w, r, v, err)
		return
	}
	p.Files, p.Next = ans.Files, ans.Next
	if v.Kind == ViewerDev {
		ids, err := c.mandateIDs(r)
		if err != nil {
			c.fail(w, r, v, err)
			return
		}
		p.Mandates = ids
	}
	c.render(w, r, v, status, "files", p)
}

// mandateIDs are the mandates the viewer may use.
func (c *Console) mandateIDs(r *http.Request) ([]string, error) {
	var ms struct {
		Mandates []struct {
			Mandate struct {
				ID string `json:"id"`
			} `json:"mandate"`
		} `json:"mandates"`
	}
	if err := c.b.Do(r, "GET", "/v0/mandates", nil, &ms); err != nil {
		return nil, err
	}
	var ids []string
	for _, m := range ms.Mandates {
		ids = append(ids, m.Mandate.ID)
	}
	return ids, nil
}

// fileUpload streams the form's file part into POST /v0/files, whose
// limits apply as it reads: the page never holds the file.
func (c *Console) fileUpload(w http.ResponseWriter, r *http.Request, v Viewer) {
	mr := formParts(r)
	p := filesPage{}
	refuse := func(status int, code, msg string) {
		p.Error, p.ErrorCode = msg, code
		c.showFiles(w, r, v, p, status)
	}
	for {
		part, err := mr.NextPart()
		if errors.Is(err, io.EOF) {
			refuse(http.StatusBadRequest, "invalid_request", "Choose a file to upload.")
			return
		}
		if err != nil {
			refuse(http.StatusBadRequest, "invalid_request", "The form could not be read: send it again.")
			return
		}
		switch part.FormName() {
		case "mandate":
			b, _ := io.ReadAll(io.LimitReader(part, 256))
			p.Mandate = strings.TrimSpace(string(b))
			continue
		case "file":
		default:
			continue
		}
		if part.FileName() == "" {
			refuse(http.StatusBadRequest, "invalid_request", "Choose a file to upload.")
			return
		}
		path := "/v0/files"
		if p.Mandate != "" {
			path += "?mandate=" + url.QueryEscape(p.Mandate)
		}
		ct := part.Header.Get("Content-Type")
		if ct == "" {
			ct = "application/octet-stream"
		}
		var ans struct {
			File string `json:"file"`
		}
		err = c.b.Send(r, "POST", path, ct, part, &ans)
		var ae *APIError
		switch {
		case errors.As(err, &ae):
			refuse(ae.Status, ae.Err.Code, ae.Err.Msg)
		case err != nil:
			c.fail(w, r, v, err)
		default:
			p.Uploaded = ans.File
			c.showFiles(w, r, v, p, http.StatusCreated)
		}
		return
	}
}
