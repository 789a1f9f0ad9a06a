package web

import (
	"net/http"
	"strings"
)

// Bearer is the credential of a request's Authorization: Bearer header,
// trimmed; ok is false when the header is absent or of another scheme.
func Bearer(r *http.Request) (credential string, ok bool) {
	scheme, credential, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	return strings.TrimSpace(credential), true
}
