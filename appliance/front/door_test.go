package front_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"holon.dev/holon/appliance/auth"
	"holon.dev/holon/appliance/front"
	"holon.dev/holon/appliance/origin"
	"holon.dev/holon/appliance/ratelimit"
	"holon.dev/holon/appliance/web"
)

// routes answers 200 with the size of the body it could read.
var routes = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	n, err := io.Copy(io.Discard, r.Body)
	if err != nil {
		web.Answer(w, err)
		return
	}
	web.JSON(w, http.StatusOK, map[string]int64{"read": n})
})

func code(t *testing.T, w *httptest.ResponseRecorder) string {
	t.Helper()
	var out struct{ Error struct{ Code string } }
	_ = json.Unmarshal(w.Body.Bytes(), &out)
	return out.Error.Code
}

// Ensure that the door refuses a NUL in the path or the query before any
// route, in both modes and for a request made in-process alike.
func TestDoor_NUL(t *testing.T) {
	for _, hosted := range []bool{false, true} {
		d := front.New(front.Config{Routes: routes, Origin: origin.New("", false), Hosted: hosted,
			Address: ratelimit.NewSet(ratelimit.Limit{Rate: 1, Burst: 100}, 0, time.Now), Log: slog.New(slog.DiscardHandler)})
		for _, target := range []string{"/v0/accounts/a%00b", "/v0/receipts?mandate=a%00", "/v0/receipts?mandate=a%2F%00"} {
			for _, inProcess := range []bool{false, true} {
				r := httptest.NewRequest("GET", target, nil)
				if inProcess {
					r = r.WithContext(auth.WithPrincipal(context.Background(), auth.Dev()))
				}
				w := httptest.NewRecorder()
				d.ServeHTTP(w, r)
				if w.Code != http.StatusBadRequest || code(t, w) != web.CodeNULCharacter {
					t.Errorf("hosted %v, in-process %v, %s: %d %s, want 400 %s", hosted, inProcess, target, w.Code, w.Body, web.CodeNULCharacter)
				}
			}
		}
	}
}

// Ensure that a dev gateway's door answers its loopback names and its
// public URL's host only (421 host_not_allowed otherwise), and that a
// hosted one leaves the Host to its keys.
func TestDoor_Host(t *testing.T) {
	dev := front.New(front.Config{Routes: routes, Origin: origin.New("https://gw.example.com", false), Log: slog.New(slog.DiscardHandler)})
	for host, want := range map[string]int{"localhost:8080": 200, "127.0.0.1": 200, "[::1]:8080": 200, "gw.example.com": 200,
		"rebind.evil.example": http.StatusMisdirectedRequest, "gw.example.com.evil.example": http.StatusMisdirectedRequest} {
		r := httptest.NewRequest("GET", "/v0/accounts", nil)
		r.Host = host
		w := httptest.NewRecorder()
		dev.ServeHTTP(w, r)
		if w.Code != want || (want != 200 && code(t, w) != front.CodeHostNotAllowed) {
			t.Errorf("dev gateway, Host %s: %d %s, want %d", host, w.Code, w.Body, want)
		}
	}
	hosted := front.New(front.Config{Routes: routes, Origin: origin.New("https://gw.example.com", false), Hosted: true,
		Address: ratelimit.NewSet(ratelimit.Limit{Rate: 1, Burst: 100}, 0, time.Now), Log: slog.New(slog.DiscardHandler)})
	r := httptest.NewRequest("GET", "/v0/accounts", nil)
	r.Host = "rebind.evil.example"
	w := httptest.NewRecorder()
	hosted.ServeHTTP(w, r)
	if w.Code != http.StatusOK {
		t.Errorf("hosted gateway, another Host: %d, want 200 (its keys decide)", w.Code)
	}
}

// Ensure that on a hosted gateway the client address's limit applies to
// requests from outside (429 with Retry-After once it is spent) and not to
// a console page's own in-process requests, and that one line is logged
// per request with its status and never its query.
func TestDoor_AddressLimitAndLog(t *testing.T) {
	var logs bytes.Buffer
	d := front.New(front.Config{Routes: routes, Origin: origin.New("", false), Hosted: true,
		Address: ratelimit.NewSet(ratelimit.Limit{Rate: 0.001, Burst: 2}, 0, time.Now), Log: slog.New(slog.NewJSONHandler(&logs, nil))})
	get := func(inProcess bool) *httptest.ResponseRecorder {
		r := httptest.NewRequest("GET", "/v0/receipts?mandate=secret-query", nil)
		if inProcess {
			r = r.WithContext(auth.WithPrincipal(context.Background(), auth.Dev()))
		}
		w := httptest.NewRecorder()
		d.ServeHTTP(w, r)
		return w
	}
	for i := range 2 {
		if w := get(false); w.Code != http.StatusOK {
			t.Fatalf("request %d of a burst of 2: %d", i+1, w.Code)
		}
	}
	if w := get(false); w.Code != http.StatusTooManyRequests || code(t, w) != web.CodeRateLimited || w.Header().Get("Retry-After") == "" {
		t.Errorf("the third request from the address: %d %s, want 429 with Retry-After", w.Code, w.Body)
	}
	for i := range 5 {
		if w := get(true); w.Code != http.StatusOK {
			t.Errorf("in-process request %d with the address's limit spent: %d, want 200", i+1, w.Code)
		}
	}
	if lines := strings.Count(logs.String(), `"msg":"request"`); lines != 8 || !strings.Contains(logs.String(), `"status":429`) ||
		strings.Contains(logs.String(), "secret-query") {
		t.Errorf("logged %d request lines (want 8, one with status 429, none with the query):\n%s", lines, logs.String())
	}
}

// Ensure that a body is bounded by web.MaxBody, except on the POST routes
// given their own bound.
func TestDoor_BodyBounds(t *testing.T) {
	d := front.New(front.Config{Routes: routes, Origin: origin.New("", false), Log: slog.New(slog.DiscardHandler),
		Bodies: map[string]int64{"/v0/files": web.MaxBody * 3}})
	big := bytes.Repeat([]byte("x"), web.MaxBody*2)
	for _, tc := range []struct {
		method, path string
		ok           bool
	}{{"POST", "/v0/files", true}, {"POST", "/v0/calls", false}, {"PUT", "/v0/files", false}} {
		w := httptest.NewRecorder()
		r := httptest.NewRequest(tc.method, tc.path, bytes.NewReader(big))
		r.Host = "localhost"
		d.ServeHTTP(w, r)
		if got := w.Code == http.StatusOK; got != tc.ok {
			t.Errorf("%s %s with %d bytes: %d %s, want read in full: %v", tc.method, tc.path, len(big), w.Code, w.Body, tc.ok)
		}
	}
}

// Ensure that the door refuses a path or a query that is not UTF-8 once
// decoded (400 invalid_request) before any route, in both modes and for a
// request made in-process alike, and lets UTF-8 through.
func TestDoor_NotUTF8(t *testing.T) {
	for _, hosted := range []bool{false, true} {
		d := front.New(front.Config{Routes: routes, Origin: origin.New("", false), Hosted: hosted,
			Address: ratelimit.NewSet(ratelimit.Limit{Rate: 1, Burst: 100}, 0, time.Now), Log: slog.New(slog.DiscardHandler)})
		for target, want := range map[string]int{
			"/v0/mandates/ann/%FF": 400, "/v0/receipts?mandate=ann/%FF": 400, "/v0/receipts?mandate=ann%2F%C3": 400,
			"/v0/receipts?before=r1&mandate=%ED%A0%80": 400, // a surrogate's encoding
			"/v0/mandates/ann/caf%C3%A9":               200, "/v0/receipts?mandate=ann/caf%C3%A9": 200, "/v0/receipts?q=100%": 200,
		} {
			for _, inProcess := range []bool{false, true} {
				r := httptest.NewRequest("GET", target, nil)
				r.Host = "localhost" // a dev gateway's own name
				if inProcess {
					r = r.WithContext(auth.WithPrincipal(context.Background(), auth.Dev()))
				}
				w := httptest.NewRecorder()
				d.ServeHTTP(w, r)
				if w.Code != want || want == 400 && code(t, w) != "invalid_request" {
					t.Errorf("hosted %v, in-process %v, %s: %d %s, want %d", hosted, inProcess, target, w.Code, w.Body, want)
				}
			}
		}
	}
}
