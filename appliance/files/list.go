package files

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/julienschmidt/httprouter"

	"holon.dev/holon"
	"holon.dev/holon/appliance/auth"
	"holon.dev/holon/appliance/web"
)

// GET /v0/files lists the caller's live files, soonest to expire first,
// a page at a time: ?limit (1-200, default 50) and ?after=<next> from the
// previous page. A human key and an agent key see the account's files; a
// dev gateway, which has no accounts, lists every owner's. It reads an
// owner index (o/<owner>/<expiry>/<id>), so a page costs its own rows
// whatever the other accounts hold.

// ownerKey is a file's row in the owner index.
func ownerKey(rec *Record) string {
	return fmt.Sprintf("o/%s/%020d/%s", rec.Owner, rec.Expires.UnixNano(), rec.ID)
}

// listedFile is one file in GET /v0/files.
type listedFile struct {
	File        string    `json:"file"`
	Owner       string    `json:"owner"`
	Size        int64     `json:"size"`
	ContentType string    `json:"content_type"`
	SHA256      string    `json:"sha256"`
	Created     time.Time `json:"created"`
	Expires     time.Time `json:"expires"`
}

// maxFilesPage bounds a page of GET /v0/files.
const maxFilesPage = 200

func (h *handlers) list(w http.ResponseWriter, r *http.Request, _ httprouter.Params, p *auth.Principal) {
	q := r.URL.Query()
	limit, err := web.Limit(r, 50, maxFilesPage)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	prefix := "o/" + p.Account + "/"
	if p.Kind == auth.KindDev {
		prefix = "o/"
	}
	after := q.Get("after")
	if after != "" && !strings.HasPrefix(after, strings.TrimPrefix(prefix, "o/")) {
		h.fail(w, r, holon.Errorf(holon.CodeInvalidRequest, "after must be the next of a previous page of GET /v0/files, unchanged"))
		return
	}
	now := h.files.now()
	out := []listedFile{}
	next := ""
	err = h.files.store.View(func(tx holon.Tx) error {
		cursor := ""
		if after != "" {
			cursor = "o/" + after
		}
		return tx.ForEachAfter(holon.BucketFiles, prefix, cursor, func(key string, _ json.RawMessage) (bool, error) {
			if len(out) == limit {
				next = strings.TrimPrefix(cursor, "o/")
				return false, nil
			}
			cursor = key
			var rec Record
			if err := tx.Get(holon.BucketFiles, fileKey(key[strings.LastIndexByte(key, '/')+1:]), &rec); errors.Is(err, holon.ErrNotFound) {
				return true, nil
			} else if err != nil {
				return false, err
			}
			if !rec.Live(now) {
				return true, nil // expired, not swept yet
			}
			out = append(out, listedFile{File: rec.Handle(), Owner: rec.Owner, Size: rec.Size, ContentType: rec.ContentType,
				SHA256: rec.SHA256, Created: rec.Created, Expires: *rec.Expires})
			return true, nil
		})
	})
	if err != nil {
		h.fail(w, r, err)
		return
	}
	web.JSON(w, http.StatusOK, map[string]any{"files": out, "next": next})
}
