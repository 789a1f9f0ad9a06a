package appliance_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"holon.dev/holon/appliance"
	"holon.dev/holon/appliance/alerts"
)

// hookReceiver is a webhook receiver on loopback that records every
// delivery, answering each with the status its answer func gives.
type hookReceiver struct {
	mu     sync.Mutex
	got    []delivery
	answer func(n int) int
	srv    *http.Server
	url    string
}

// delivery is one POST a receiver got.
type delivery struct {
	header http.Header
	body   []byte
	status int
}

func startReceiver(t *testing.T, ln net.Listener, answer func(n int) int) *hookReceiver {
	t.Helper()
	h := &hookReceiver{answer: answer, url: "http://" + ln.Addr().String() + "/hook"}
	h.srv = &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		h.mu.Lock()
		status := h.answer(len(h.got))
		h.got = append(h.got, delivery{header: r.Header.Clone(), body: b, status: status})
		h.mu.Unlock()
		w.WriteHeader(status)
	})}
	go func() { _ = h.srv.Serve(ln) }()
	t.Cleanup(func() { h.srv.Close() })
	return h
}

// wait waits until the receiver answered n deliveries with a 2xx.
func (h *hookReceiver) wait(t *testing.T, n int, within time.Duration) []delivery {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		h.mu.Lock()
		var ok []delivery
		for _, d := range h.got {
			if d.status/100 == 2 {
				ok = append(ok, d)
			}
		}
		all := len(h.got)
		h.mu.Unlock()
		if len(ok) >= n {
			return ok
		}
		if time.Now().After(deadline) {
			t.Fatalf("the receiver got %d deliveries (%d accepted) in %s, want %d accepted", all, len(ok), within, n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// verifyHolonSignature is the manual's recipe, written here from its
// words alone (webui/manual/money.md, "Checking a delivery"): split the
// Holon-Signature header on commas into t= and v1=; refuse a t more than
// five minutes from now; compute HMAC-SHA256 with the secret over t, a
// ".", and the raw body; compare it with v1 in constant time.
func verifyHolonSignature(secret, header string, body []byte, now time.Time) bool {
	var ts, sig string
	for _, part := range strings.Split(header, ",") {
		k, v, _ := strings.Cut(strings.TrimSpace(part), "=")
		switch k {
		case "t":
			ts = v
		case "v1":
			sig = v
		}
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil || sig == "" {
		return false
	}
	if d := now.Sub(time.Unix(sec, 0)); d > 5*time.Minute || d < -5*time.Minute {
		return false
	}
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte(ts + "." + string(body)))
	want, err := hex.DecodeString(sig)
	return err == nil && hmac.Equal(mac.Sum(nil), want)
}

// alertsApp is a hosted gateway that delivers webhooks to loopback, with
// a short retry schedule.
func alertsApp(t *testing.T, retryFor time.Duration) *hostedApp {
	return newHostedApp(t, func(c *appliance.Config) {
		c.AllowPrivateEndpoints = true
		c.FileSecret = "file-secret-0123456789abcdefghijklmnopqrstuv" // the webhooks' secrets are sealed
		c.Alerts = alerts.Settings{RetryFor: retryFor, FirstRetry: 100 * time.Millisecond, MaxBackoff: 400 * time.Millisecond}
	})
}

// watched creates ann/watched: a total with alerts, holon-labs' agents.
func watched(a account, total string, alerts ...string) {
	a.createMandate("watched", map[string]any{
		"budget": map[string]any{"total": total, "alerts": alerts},
		"allow":  map[string]any{"agents": []string{"holon-labs/*"}},
	})
}

// Ensure that an account's webhook gets each alert once, signed so that
// the manual's recipe verifies it (and refuses a changed body, another
// secret or an old timestamp), with the alert's id in a header and in the
// body; that the secret is shown only when the webhook is set; and that
// the alerts are told to the assistant (call_agent's answer, get_budget),
// listed by the API and shown on the console's pages.
func TestAlerts_WebhookSignedAndShownEverywhere(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	rcv := startReceiver(t, ln, func(int) int { return http.StatusNoContent })
	ta := alertsApp(t, time.Minute)
	ann := ta.signup("ann")
	set := ann.human.must(http.StatusOK, "PUT", "/v0/me/webhook", map[string]any{"url": rcv.url})
	secret := str(set["secret"])
	if !strings.HasPrefix(secret, "whsec_") || len(secret) < 40 || set["url"] != rcv.url {
		t.Fatalf("PUT /v0/me/webhook: %v", set)
	}
	if got := ann.human.must(http.StatusOK, "GET", "/v0/me/webhook", nil); got["secret"] != nil || got["url"] != rcv.url {
		t.Errorf("GET /v0/me/webhook shows %v", got)
	}
	watched(ann, "0.20", "50%", "80%")
	key, _ := ann.newKey("ann/watched", false)
	s := connectMCP(t, ta.srv.URL+"/mcp", key, nil)
	args := map[string]any{"agent": "holon-labs/company-lookup", "input": map[string]any{"name": "Globex GmbH"}}
	if first := s.ok("call_agent", args); first["alerts"] != nil {
		t.Errorf("the first call (0.08 of 0.20) carries alerts: %v", first["alerts"])
	}
	second := s.ok("call_agent", args) // 0.16 of 0.20: 50% and 80% at once
	told, _ := second["alerts"].([]any)
	if len(told) != 2 || obj(told[0])["threshold"] != "50%" || obj(told[1])["threshold"] != "80%" || obj(told[1])["spent"] != "0.16" {
		t.Fatalf("the second call's alerts: %v", second["alerts"])
	}
	b := s.ok("get_budget", map[string]any{})
	if as, _ := b["alerts"].([]any); len(as) != 2 || len(b["alert_thresholds"].([]any)) != 2 {
		t.Errorf("get_budget: %v", b)
	}

	got := rcv.wait(t, 2, 10*time.Second)
	ids := map[string]bool{}
	for _, d := range got {
		var ev struct {
			ID    string `json:"id"`
			Type  string `json:"type"`
			Alert struct {
				Threshold, Mandate, Spent string
			} `json:"alert"`
		}
		if err := json.Unmarshal(d.body, &ev); err != nil {
			t.Fatal(err)
		}
		if ev.ID == "" || d.header.Get("Holon-Event-Id") != ev.ID || ev.Type != "budget.alert" || ev.Alert.Mandate != "ann/watched" {
			t.Errorf("delivery %s: %s", d.header, d.body)
		}
		if ids[ev.ID] {
			t.Errorf("%s delivered twice", ev.ID)
		}
		ids[ev.ID] = true
		sig := d.header.Get("Holon-Signature")
		if !verifyHolonSignature(secret, sig, d.body, time.Now()) {
			t.Errorf("the signature %q of %s does not verify", sig, d.body)
		}
		changed := append([]byte{}, d.body...)
		changed[len(changed)-2] ^= 1
		if verifyHolonSignature(secret, sig, changed, time.Now()) || verifyHolonSignature("whsec_other", sig, d.body, time.Now()) ||
			verifyHolonSignature(secret, sig, d.body, time.Now().Add(10*time.Minute)) {
			t.Errorf("the recipe accepts a changed body, another secret or an old timestamp")
		}
	}
	if !ids["ann/watched/total/50%"] || !ids["ann/watched/total/80%"] {
		t.Errorf("delivered %v", ids)
	}

	// Listed with their deliveries, once those are recorded.
	var list map[string]any
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		list = ann.human.must(http.StatusOK, "GET", "/v0/alerts", nil)
		as, _ := list["alerts"].([]any)
		if len(as) == 2 && obj(obj(as[0])["delivery"])["status"] == "delivered" && obj(obj(as[1])["delivery"])["status"] == "delivered" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("GET /v0/alerts: %v", list)
		}
	}
	if m := ann.human.must(http.StatusOK, "GET", "/v0/mandates/ann/watched/alerts", nil); len(m["alerts"].([]any)) != 2 {
		t.Errorf("GET /v0/mandates/ann/watched/alerts: %v", m)
	}
	if st, out := ta.signup("bob").human.do("GET", "/v0/mandates/ann/watched/alerts", nil); st != http.StatusNotFound {
		t.Errorf("another account reads ann's alerts: %d %v", st, out)
	}
	if st, out := ann.human.do("PUT", "/v0/me/webhook", map[string]any{"url": "ftp://example.com/x"}); st != http.StatusBadRequest || code(out) != "endpoint_not_https" {
		t.Errorf("an ftp webhook: %d %v", st, out)
	}

	br := signIn(t, ta, ann.humanKey)
	resp, body := br.get("/console/mandates/ann/watched")
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, `data-alert="ann/watched/total/80%"`) ||
		!strings.Contains(body, "0.16 of 0.20 EUR") || !strings.Contains(body, "delivered (1 attempt)") {
		t.Errorf("the console's mandate page: %d\n%s", resp.StatusCode, body)
	}
	// The store keeps the secret sealed: a backup does not show it.
	req, _ := http.NewRequest("GET", ta.srv.URL+"/v0/admin/backup", nil)
	req.Header.Set("Authorization", "Bearer "+testAdminKey)
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusOK {
		t.Errorf("GET /v0/admin/backup: %v %v", resp, err)
	} else {
		dump, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if !strings.Contains(string(dump), `"t":"webhooks"`) || strings.Contains(string(dump), secret) || strings.Contains(string(dump), secret[6:]) {
			t.Errorf("the backup does not hold the webhook, or holds its secret in the clear")
		}
	}

	resp, body = br.get("/console/webhook")
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, rcv.url) || strings.Contains(body, secret) {
		t.Errorf("the console's webhook page: %d\n%s", resp.StatusCode, body)
	}
	resp, body = br.post("/console/webhook", url.Values{"url": {rcv.url + "?v=2"}})
	if resp.StatusCode != http.StatusCreated || !strings.Contains(body, "whsec_") || !strings.Contains(body, "?v=2") {
		t.Errorf("setting the webhook in the console: %d\n%s", resp.StatusCode, body)
	}
}

// Ensure that POST /v0/calls answers the alerts its call reached, as
// call_agent does, and none when it reached nothing.
func TestAlerts_CallAnswerTellsThem(t *testing.T) {
	ta := alertsApp(t, time.Minute)
	ann := ta.signup("ann")
	watched(ann, "0.30", "50%", "80%")
	if first := ann.human.must(http.StatusOK, "POST", "/v0/calls", lookup("ann/watched")); first["alerts"] != nil {
		t.Errorf("the first call (0.08 of 0.30) carries alerts: %v", first["alerts"])
	}
	second := ann.human.must(http.StatusOK, "POST", "/v0/calls", lookup("ann/watched")) // 0.16: 50%
	told, _ := second["alerts"].([]any)
	if len(told) != 1 || obj(told[0])["id"] != "ann/watched/total/50%" || obj(told[0])["spent"] != "0.16" || obj(told[0])["receipt"] != receiptOf(second)["id"] {
		t.Errorf("the second call's alerts: %v", second["alerts"])
	}
	third := ann.human.must(http.StatusOK, "POST", "/v0/calls", lookup("ann/watched")) // 0.24: 80%, not 50% again
	if told, _ := third["alerts"].([]any); len(told) != 1 || obj(told[0])["id"] != "ann/watched/total/80%" {
		t.Errorf("the third call's alerts: %v", third["alerts"])
	}
}

// Ensure that a receiver that is down when an alert is recorded (no
// listener, then answering 503) gets it once it comes back, within the
// retry time, and that a receiver that never comes back has the delivery
// given up as failed once the retry time has passed.
func TestAlerts_ReceiverDownGetsItLater(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // down: nothing listens
	ta := alertsApp(t, 20*time.Second)
	ann := ta.signup("ann")
	ann.human.must(http.StatusOK, "PUT", "/v0/me/webhook", map[string]any{"url": "http://" + addr + "/hook"})
	watched(ann, "0.10", "50%")
	ann.human.must(http.StatusOK, "POST", "/v0/calls", lookup("ann/watched"))
	pending := func() map[string]any {
		as, _ := ann.human.must(http.StatusOK, "GET", "/v0/alerts", nil)["alerts"].([]any)
		if len(as) != 1 {
			t.Fatalf("%d alerts, want 1", len(as))
		}
		return obj(obj(as[0])["delivery"])
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if d := pending(); d["attempts"].(float64) >= 2 {
			if d["status"] != "pending" || !strings.Contains(str(d["last_error"]), "refused") {
				t.Errorf("the delivery while the receiver is down: %v", d)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the delivery was not retried: %v", pending())
		}
	}
	back, err := net.Listen("tcp", addr)
	if err != nil {
		t.Skipf("the receiver's port was taken meanwhile: %v", err)
	}
	rcv := startReceiver(t, back, func(n int) int {
		if n < 2 {
			return http.StatusServiceUnavailable // up, not ready yet
		}
		return http.StatusOK
	})
	started := time.Now()
	got := rcv.wait(t, 1, 20*time.Second)
	// The receiver has the delivery before the gateway records that it
	// answered 200: the record follows within a commit.
	d := pending()
	for deadline := time.Now().Add(5 * time.Second); d["status"] == "pending" && time.Now().Before(deadline); d = pending() {
		time.Sleep(10 * time.Millisecond)
	}
	if d["status"] != "delivered" || d["attempts"].(float64) < 4 {
		t.Errorf("the delivery once the receiver is back: %v", d)
	}
	if len(got) != 1 || got[0].header.Get("Holon-Event-Id") != "ann/watched/total/50%" {
		t.Errorf("accepted deliveries %d, event %q", len(got), got[0].header.Get("Holon-Event-Id"))
	}
	t.Logf("delivered %s after the receiver came back, %d attempts in all", time.Since(started), int(pending()["attempts"].(float64)))
}

// Ensure that a delivery is given up as failed once the retry time has
// passed with the receiver still down.
func TestAlerts_GivenUpAfterRetryTime(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	rcv := startReceiver(t, ln, func(int) int { return http.StatusInternalServerError })
	ta := alertsApp(t, time.Second)
	ann := ta.signup("ann")
	ann.human.must(http.StatusOK, "PUT", "/v0/me/webhook", map[string]any{"url": rcv.url})
	watched(ann, "0.10", "50%")
	ann.human.must(http.StatusOK, "POST", "/v0/calls", lookup("ann/watched"))
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		as, _ := ann.human.must(http.StatusOK, "GET", "/v0/alerts", nil)["alerts"].([]any)
		d := obj(obj(as[0])["delivery"])
		if d["status"] == "failed" {
			if !strings.Contains(str(d["last_error"]), "500") || d["attempts"].(float64) < 3 {
				t.Errorf("the failed delivery: %v", d)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the delivery was not given up: %v", d)
		}
	}
	rcv.mu.Lock()
	n := len(rcv.got)
	rcv.mu.Unlock()
	time.Sleep(500 * time.Millisecond)
	rcv.mu.Lock()
	defer rcv.mu.Unlock()
	if len(rcv.got) != n {
		t.Errorf("sent again after it was given up: %d then %d", n, len(rcv.got))
	}
}
