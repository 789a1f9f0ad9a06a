package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"holon.dev/holon/backup/pgtest"
	"holon.dev/holon/gateway"
)

// alertReceiver is a webhook receiver on loopback that counts the
// deliveries of each event id.
type alertReceiver struct {
	url string
	mu  sync.Mutex
	ids []string
}

func startAlertReceiver(t *testing.T) *alertReceiver {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	a := &alertReceiver{url: "http://" + ln.Addr().String() + "/hook"}
	srv := &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		var ev struct{ ID string }
		if json.Unmarshal(b, &ev) != nil || ev.ID == "" || ev.ID != r.Header.Get("Holon-Event-Id") || r.Header.Get("Holon-Signature") == "" {
			http.Error(w, "not an alert", http.StatusBadRequest)
			return
		}
		a.mu.Lock()
		a.ids = append(a.ids, ev.ID)
		a.mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	})}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { srv.Close() })
	return a
}

// deliveries counts the deliveries of each event id so far.
func (a *alertReceiver) deliveries() map[string]int {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := map[string]int{}
	for _, id := range a.ids {
		out[id]++
	}
	return out
}

// Ensure that an alert recorded by a settlement is delivered even when
// holon serve is killed (SIGKILL) right after the settlement is durable,
// before anything is sent: the restarted gateway delivers each event
// once, and a gateway started again later sends none of them again.
func TestServe_Alerts_KilledBeforeDelivery(t *testing.T) {
	if testing.Short() {
		t.Skip("starts holon serve three times")
	}
	registry, _ := opsDirs(t)
	mandates := t.TempDir()
	// One call of ops-test/slow (0.01) reaches both thresholds.
	mandate := strings.Replace(opsMandate, `budget: { total: "50.00", per_call: "1.00" }`,
		`budget: { total: "0.01", per_call: "1.00", alerts: ["50%", "100%"] }`, 1)
	if err := os.WriteFile(filepath.Join(mandates, "ops-test.yaml"), []byte(mandate), 0o644); err != nil {
		t.Fatal(err)
	}
	rcv := startAlertReceiver(t)
	db := filepath.Join(t.TempDir(), "holon.db")
	env := []string{"HOLON_REGISTRY=" + registry, "HOLON_ENV=development", "HOLON_ALLOW_PRIVATE_ENDPOINTS=1",
		"HOLON_ALERT_FIRST_RETRY=1s", "HOLON_ALERT_RETRY_FOR=1m"}
	args := []string{"--addr", "127.0.0.1:0", "--db", db, "--mandates", mandates}

	first := startChild(t, append(env, "HOLON_TEST_CRASH_AT="+gateway.StepSettleDurable), args...)
	api := "http://" + first.addr
	c := &http.Client{Timeout: 10 * time.Second}
	var hook map[string]any
	if st := do(t, c, "PUT", api+"/v0/me/webhook?account=ops", "", map[string]string{"url": rcv.url}, &hook); st != http.StatusOK {
		t.Fatalf("PUT /v0/me/webhook: %d %v", st, hook)
	}
	if ans := postCall(api, "ops-test/slow", ""); ans.code != 0 {
		t.Fatalf("the call answered %d before the kill", ans.code)
	}
	select {
	case err := <-first.exited:
		if ws, ok := exitStatus(err); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
			t.Fatalf("holon serve exited with %v, want killed at %s", err, gateway.StepSettleDurable)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("holon serve was not killed")
	}
	if got := rcv.deliveries(); len(got) != 0 {
		t.Fatalf("delivered before the kill: %v (the kill must come between the settlement and the delivery)", got)
	}

	second := startChild(t, env, args...)
	want := []string{"ops/test/total/50%", "ops/test/total/100%"}
	deadline := time.Now().Add(20 * time.Second)
	for len(rcv.deliveries()) < len(want) {
		if time.Now().After(deadline) {
			t.Fatalf("after the restart the receiver got %v, want %v", rcv.deliveries(), want)
		}
		time.Sleep(50 * time.Millisecond)
	}
	var alerts struct {
		Alerts []struct {
			ID       string
			Receipt  string
			Delivery struct{ Status string }
		}
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		do(t, c, "GET", "http://"+second.addr+"/v0/alerts", "", nil, &alerts)
		if len(alerts.Alerts) == 2 && alerts.Alerts[0].Delivery.Status == "delivered" && alerts.Alerts[1].Delivery.Status == "delivered" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("GET /v0/alerts after the restart: %+v", alerts)
		}
	}
	if err := second.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	second.wait(t, 20*time.Second)

	// A third start finds nothing left to deliver.
	startChild(t, env, args...)
	time.Sleep(2500 * time.Millisecond) // two polls of the worker
	got := rcv.deliveries()
	for _, id := range want {
		if got[id] != 1 {
			t.Errorf("%s delivered %d times, want once", id, got[id])
		}
	}
	if len(got) != len(want) {
		t.Errorf("delivered %v, want %v once each", got, want)
	}
}

// Ensure that on one PostgreSQL store, two gateways settling calls that
// reach ten thresholds between them deliver each alert once: the
// delivery worker runs on one gateway at a time.
func TestServe_Alerts_PostgresDeliversOnce(t *testing.T) {
	srv := pgtest.Start(t)
	url := srv.CreateDB(t, "alerts")
	registry, _ := opsDirs(t)
	mandates := t.TempDir()
	// Ten calls of 0.01 reach one threshold each.
	var ths []string
	for i := 1; i <= 10; i++ {
		ths = append(ths, fmt.Sprintf("%q", fmt.Sprintf("%d%%", i*10)))
	}
	mandate := strings.Replace(opsMandate, `budget: { total: "50.00", per_call: "1.00" }`,
		`budget: { total: "0.10", per_call: "1.00", alerts: [`+strings.Join(ths, ", ")+`] }`, 1)
	if err := os.WriteFile(filepath.Join(mandates, "ops-test.yaml"), []byte(mandate), 0o644); err != nil {
		t.Fatal(err)
	}
	rcv := startAlertReceiver(t)
	env := map[string]string{"HOLON_REGISTRY": registry, "HOLON_ALLOW_PRIVATE_ENDPOINTS": "1", "HOLON_ALERT_FIRST_RETRY": "100ms"}
	args := func() []string {
		return []string{"--addr", "127.0.0.1:0", "--db", filepath.Join(t.TempDir(), "holon.db"), "--mandates", mandates, "--store", url}
	}
	gws := []*runningServe{startServe(t, env, args()...), startServe(t, env, args()...)}
	c := &http.Client{Timeout: 10 * time.Second}
	if st := do(t, c, "PUT", "http://"+gws[1].addrs["api"]+"/v0/me/webhook?account=ops", "", map[string]string{"url": rcv.url}, nil); st != http.StatusOK {
		t.Fatalf("PUT /v0/me/webhook: %d", st)
	}
	for i := range 10 {
		if code, out := postCallTo(t, gws[i%2].addrs["api"], "ops/test", "ops-test/slow", map[string]any{"ms": 0, "word": "w"}); code != http.StatusOK {
			t.Fatalf("call %d: %d %v", i, code, out)
		}
	}
	within(t, 30*time.Second, "ten alerts delivered", func() bool { return len(rcv.deliveries()) == 10 })
	time.Sleep(time.Second) // ten polls of each worker
	for id, n := range rcv.deliveries() {
		if n != 1 {
			t.Errorf("%s delivered %d times", id, n)
		}
	}
}
