package webui

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"net/url"

	"holon.dev/holon/appliance/origin"
)

// CSRFCookie holds the browser's form token. Every form of the console
// sends the same value back as the CSRFField field (a double-submitted
// token): another site can make the browser send the cookie, but cannot
// read it to put it in a form. The cookie is HttpOnly and SameSite=Strict,
// and a POST whose Origin is another site is refused besides.
const (
	CSRFCookie = "holon_csrf"
	CSRFField  = "csrf"
)

// CSRFToken returns the request's form token, setting a fresh one on w
// when the browser has none yet (Secure when the gateway's origin rule
// says the browser came over https). Pages put it in a hidden CSRFField
// input of every form.
func CSRFToken(w http.ResponseWriter, r *http.Request, rule *origin.Rule) string {
	if c, err := r.Cookie(CSRFCookie); err == nil && len(c.Value) == 43 {
		return c.Value
	}
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	tok := base64.RawURLEncoding.EncodeToString(b)
	http.SetCookie(w, &http.Cookie{
		Name: CSRFCookie, Value: tok, Path: "/", HttpOnly: true,
		Secure: rule.HTTPS(r), SameSite: http.SameSiteStrictMode,
	})
	// Later code in this request (the page's forms) reads the same token.
	r.AddCookie(&http.Cookie{Name: CSRFCookie, Value: tok})
	return tok
}

// CheckCSRF refuses a form POST whose token does not match the browser's
// cookie, or that comes from another origin than the gateway's own (the
// origin rule's).
func CheckCSRF(r *http.Request, rule *origin.Rule) error {
	if err := checkOrigin(r, rule); err != nil {
		return err
	}
	return checkToken(r, r.PostFormValue(CSRFField))
}

// checkOrigin refuses a POST from another origin.
func checkOrigin(r *http.Request, rule *origin.Rule) error {
	if o := r.Header.Get("Origin"); o != "" && o != "null" && !rule.SameOrigin(r, o) {
		return errors.New("this form was sent from another site: open the console and send it again")
	}
	return nil
}

// checkToken compares a form's token with the browser's cookie.
func checkToken(r *http.Request, got string) error {
	c, err := r.Cookie(CSRFCookie)
	if err != nil || c.Value == "" {
		return errors.New("the form's token is missing (are cookies blocked?): reload the page and send it again")
	}
	if subtle.ConstantTimeCompare([]byte(got), []byte(c.Value)) != 1 {
		return errors.New("the form's token does not match: reload the page and send it again")
	}
	return nil
}

func isMultipart(r *http.Request) bool {
	mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	return mt == "multipart/form-data"
}

// partsKey carries a multipart form's reader, past its token.
type partsKey struct{}

// checkMultipartCSRF reads a multipart form's first part, which must be
// its token (a page puts the hidden field first), and checks it: a file
// is read only once the form is known to come from the console.
func checkMultipartCSRF(r *http.Request, rule *origin.Rule) (*http.Request, error) {
	if err := checkOrigin(r, rule); err != nil {
		return r, err
	}
	mr, err := r.MultipartReader()
	if err != nil {
		return r, errors.New("the form could not be read: send it again from its page")
	}
	part, err := mr.NextPart()
	if err != nil || part.FormName() != CSRFField {
		return r, errors.New("the form's token is missing: reload the page and send it again")
	}
	tok, err := io.ReadAll(io.LimitReader(part, 64))
	if err != nil {
		return r, errors.New("the form could not be read: send it again from its page")
	}
	if err := checkToken(r, string(tok)); err != nil {
		return r, err
	}
	return r.WithContext(context.WithValue(r.Context(), partsKey{}, mr)), nil
}

// formParts is the rest of a multipart form checked by upload.
func formParts(r *http.Request) *multipart.Reader {
	mr, _ := r.Context().Value(partsKey{}).(*multipart.Reader)
	return mr
}

func urlQueryEscape(s string) string { return url.QueryEscape(s) }
