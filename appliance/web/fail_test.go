package web_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"holon.dev/holon"
	"holon.dev/holon/appliance/publishing"
	"holon.dev/holon/appliance/web"
)

// Ensure that an error with no code, or with a code the gateway's table
// does not know, is answered 500 gateway_error with a message that tells
// nothing of it, and logged once with the request; that gateway_error
// itself is logged too; and that every other error keeps its table status
// and is not logged.
func TestFail_InternalErrors(t *testing.T) {
	tests := []struct {
		name   string
		err    error
		status int
		code   string
		logged bool
		secret string // must not reach the client
	}{
		{"plain error", fmt.Errorf("read /var/lib/holon/holon.db: input/output error"), 500, holon.CodeGatewayError, true, "input/output"},
		{"wrapped plain error", fmt.Errorf("receipts: %w", errors.New("decode receipts/7: unexpected end")), 500, holon.CodeGatewayError, true, "decode"},
		{"unknown code", holon.Errorf("no_such_code", "the store said hunter2"), 500, holon.CodeGatewayError, true, "hunter2"},
		{"wrapped unknown code", fmt.Errorf("x: %w", holon.Errorf("made_up", "hunter2")), 500, holon.CodeGatewayError, true, "hunter2"},
		{"gateway_error", holon.Errorf(holon.CodeGatewayError, "derive sub-mandate: no fx rate for USD"), 500, holon.CodeGatewayError, true, ""},
		{"invalid_request", holon.Errorf(holon.CodeInvalidRequest, "limit must be between 1 and 500"), 400, holon.CodeInvalidRequest, false, ""},
		{"not_found", web.NotFound("no receipt r9"), 404, holon.CodeNotFound, false, ""},
		{"wrapped not_found", fmt.Errorf("tree: %w", web.NotFound("no receipt r9")), 404, holon.CodeNotFound, false, ""},
		{"rate_limited", holon.Errorf(web.CodeRateLimited, "slow down"), 429, web.CodeRateLimited, false, ""},
		{"version_exists", holon.Errorf(publishing.CodeVersionExists, "1.0.0 is published"), 409, publishing.CodeVersionExists, false, ""},
		{"invalid_token", holon.Errorf(holon.CodeInvalidToken, "not a delegation token"), 401, holon.CodeInvalidToken, false, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var logs bytes.Buffer
			log := slog.New(slog.NewJSONHandler(&logs, nil))
			w := httptest.NewRecorder()
			web.Fail(log, w, httptest.NewRequest("GET", "/v0/receipts?mandate=carol/x", nil), tc.err)
			var body struct {
				Error struct{ Code, Message string }
			}
			if err := json.Unmarshal(w.Body.Bytes(), &body); err != nil {
				t.Fatalf("answer %q: %v", w.Body, err)
			}
			if w.Code != tc.status || body.Error.Code != tc.code {
				t.Errorf("answered %d %s, want %d %s", w.Code, body.Error.Code, tc.status, tc.code)
			}
			if tc.secret != "" && (strings.Contains(w.Body.String(), tc.secret) || body.Error.Message != web.InternalMessage) {
				t.Errorf("the client was told %q, want only %q", body.Error.Message, web.InternalMessage)
			}
			lines := strings.Count(logs.String(), "\n")
			switch {
			case !tc.logged && lines != 0:
				t.Errorf("logged %q, want nothing", logs.String())
			case tc.logged && (lines != 1 || !strings.Contains(logs.String(), `"level":"ERROR"`) ||
				!strings.Contains(logs.String(), `"path":"/v0/receipts"`) || !strings.Contains(logs.String(), jsonText(tc.err.Error()))):
				t.Errorf("logged %q, want one error line with the path and %q", logs.String(), tc.err)
			}
			if tc.status == http.StatusUnauthorized && w.Header().Get("WWW-Authenticate") == "" {
				t.Error("a 401 without WWW-Authenticate")
			}
		})
	}
}

// jsonText is s as it appears inside a JSON string.
func jsonText(s string) string {
	b, _ := json.Marshal(s)
	return string(b[1 : len(b)-1])
}
