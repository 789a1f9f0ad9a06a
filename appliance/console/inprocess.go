package console

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"

	"holon.dev/holon/appliance/auth"
	"holon.dev/holon/appliance/web"
	"holon.dev/holon/webui"
)

// Do serves one API request in-process through the front door (its NUL,
// host and body checks, its log line), the router, the route's access
// rule and the handler, exactly as for a request from outside, with the
// session's principal (nobody when none). The rate limits are not
// charged again: the page's own request was counted.
func (b *Backend) Do(r *http.Request, method, path string, body, out any) error {
	var rd io.Reader = http.NoBody
	if body != nil {
		raw, err := json.Marshal(body)
		if err != nil {
			return fmt.Errorf("console request body: %w", err)
		}
		rd = bytes.NewReader(raw)
	}
	return b.Send(r, method, path, "application/json", rd, out)
}

// Send is Do with a body as it is (a file, a YAML manifest), of the given
// media type. Its length is unknown to the handler, which reads it
// under its own limits as it would a request's.
func (b *Backend) Send(r *http.Request, method, path, contentType string, body io.Reader, out any) error {
	p, err := b.cfg.Sessions.Principal(r)
	if err != nil {
		return err
	}
	if p == nil {
		p = auth.Nobody()
	}
	ctx := auth.WithPrincipal(r.Context(), p)
	req, err := http.NewRequestWithContext(ctx, method, path, body)
	if err != nil {
		return fmt.Errorf("console request %s %s: %w", method, path, err)
	}
	if req.ContentLength == 0 && body != http.NoBody {
		req.ContentLength = -1 // a stream: its length is unknown
	}
	req.RemoteAddr = r.RemoteAddr
	// The browser's origin, for what is built from it (the OAuth issuer).
	req.Host, req.TLS = r.Host, r.TLS
	if p := r.Header.Get("X-Forwarded-Proto"); p != "" {
		req.Header.Set("X-Forwarded-Proto", p)
	}
	if xff := r.Header.Get("X-Forwarded-For"); xff != "" {
		req.Header.Set("X-Forwarded-For", xff)
	}
	req.Header.Set("Content-Type", contentType)
	rec := &recorder{header: http.Header{}, code: http.StatusOK}
	b.cfg.Front.ServeHTTP(rec, req) // the front door, as a request from outside
	if rec.code/100 != 2 {
		var eb web.ErrorBody
		if err := json.Unmarshal(rec.body.Bytes(), &eb); err != nil || eb.Error == nil {
			return fmt.Errorf("console request %s %s: status %d", method, path, rec.code)
		}
		if out != nil {
			// A call that ran and failed still has its receipt.
			_ = json.Unmarshal(rec.body.Bytes(), out)
		}
		return &webui.APIError{Status: rec.code, Err: eb.Error}
	}
	if out == nil {
		return nil
	}
	if w, ok := out.(*bytes.Buffer); ok {
		_, err := w.Write(rec.body.Bytes())
		return err
	}
	if err := json.Unmarshal(rec.body.Bytes(), out); err != nil {
		return fmt.Errorf("console request %s %s: decode: %w", method, path, err)
	}
	return nil
}

// recorder is the response of an in-process request.
type recorder struct {
	header http.Header
	code   int
	wrote  bool
	body   bytes.Buffer
}

func (r *recorder) Header() http.Header { return r.header }

func (r *recorder) WriteHeader(code int) {
	if !r.wrote {
		r.code, r.wrote = code, true
	}
}

func (r *recorder) Write(b []byte) (int, error) {
	r.WriteHeader(http.StatusOK)
	return r.body.Write(b)
}
