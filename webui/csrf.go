package webui

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"net/http"
	"net/url"
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
// when the browser has none yet. Pages put it in a hidden CSRFField input
// of every form.
func CSRFToken(w http.ResponseWriter, r *http.Request) string {
	if c, err := r.Cookie(CSRFCookie); err == nil && len(c.Value) == 43 {
		return c.Value
	}
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	tok := base64.RawURLEncoding.EncodeToString(b)
	http.SetCookie(w, &http.Cookie{
		Name: CSRFCookie, Value: tok, Path: "/", HttpOnly: true,
		Secure: IsHTTPS(r), SameSite: http.SameSiteStrictMode,
	})
	// Later code in this request (the page's forms) reads the same token.
	r.AddCookie(&http.Cookie{Name: CSRFCookie, Value: tok})
	return tok
}

// CheckCSRF refuses a form POST whose token does not match the browser's
// cookie, or that comes from another origin.
func CheckCSRF(r *http.Request) error {
	if o := r.Header.Get("Origin"); o != "" && o != "null" {
		u, err := url.Parse(o)
		if err != nil || u.Host != r.Host {
			return errors.New("this form was sent from another site: open the console and send it again")
		}
	}
	c, err := r.Cookie(CSRFCookie)
	if err != nil || c.Value == "" {
		return errors.New("the form's token is missing (are cookies blocked?): reload the page and send it again")
	}
	got := r.PostFormValue(CSRFField)
	if subtle.ConstantTimeCompare([]byte(got), []byte(c.Value)) != 1 {
		return errors.New("the form's token does not match: reload the page and send it again")
	}
	return nil
}

// IsHTTPS reports whether the browser reached the gateway over https
// (directly, or through a proxy that says so).
func IsHTTPS(r *http.Request) bool {
	return r.TLS != nil || r.Header.Get("X-Forwarded-Proto") == "https"
}

func urlQueryEscape(s string) string { return url.QueryEscape(s) }
