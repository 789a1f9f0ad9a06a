package main

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"holon.dev/holon"
	"holon.dev/holon/gateway/storetest"
	"holon.dev/holon/journal"
	"holon.dev/holon/kv"
)

// child is holon serve running in a process of its own (this test binary
// in its HOLON_TEST_CHILD=serve role), under a fake service manager: a
// unixgram $NOTIFY_SOCKET the test reads.
type child struct {
	cmd    *exec.Cmd
	notify *net.UnixConn
	stderr *lockedBuffer
	exited chan error
	addr   string
}

func startChild(t *testing.T, env []string, args ...string) *child {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "notify")
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: sock, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	a, _ := json.Marshal(args)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), append(env,
		"HOLON_TEST_CHILD=serve", "HOLON_TEST_CHILD_ARGS="+string(a),
		"NOTIFY_SOCKET="+sock, "WATCHDOG_USEC=200000")...)
	c := &child{cmd: cmd, notify: conn, stderr: &lockedBuffer{}, exited: make(chan error, 1)}
	cmd.Stderr = c.stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { c.exited <- cmd.Wait() }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		if t.Failed() {
			t.Logf("holon serve's log:\n%s", c.stderr.String())
		}
	})
	// READY=1 comes with the address in STATUS.
	msg := c.expect(t, "READY=1", 30*time.Second)
	for _, line := range strings.Split(msg, "\n") {
		if addr, ok := strings.CutPrefix(line, "STATUS=serving on "); ok {
			c.addr = addr
		}
	}
	if c.addr == "" {
		t.Fatalf("READY=1 without the address: %q", msg)
	}
	return c
}

// expect reads notifications until one holds want, and returns it.
func (c *child) expect(t *testing.T, want string, within time.Duration) string {
	t.Helper()
	deadline := time.Now().Add(within)
	buf := make([]byte, 4096)
	for {
		c.notify.SetReadDeadline(deadline)
		n, _, err := c.notify.ReadFromUnix(buf)
		if err != nil {
			t.Fatalf("waiting for %s from holon serve: %v\n%s", want, err, c.stderr.String())
		}
		if msg := string(buf[:n]); strings.Contains(msg, want+"\n") {
			return msg
		}
	}
}

func (c *child) wait(t *testing.T, within time.Duration) {
	t.Helper()
	select {
	case err := <-c.exited:
		if err != nil {
			t.Fatalf("holon serve exited: %v\n%s", err, c.stderr.String())
		}
	case <-time.After(within):
		t.Fatalf("holon serve did not exit within %s", within)
	}
}

// Ensure that on SIGTERM holon serve, as systemd runs it, reports
// STOPPING=1, stops accepting requests at once, lets the calls that can
// finish within --shutdown-timeout finish (their callers get their
// answers), cuts the others and exits 0; and that after a restart no hold
// survives, no receipt is left running, the calls cut short (to an
// in-process agent, whose reservations the engine keeps in memory) left no
// trace at all, nothing billed, and the money adds up.
// Along the way, the notify protocol: READY=1, WATCHDOG=1 pings, STOPPING=1.
func TestServe_SIGTERM_DrainsCallsAndLeavesNoHold(t *testing.T) {
	registry, mandates := opsDirs(t)
	db := filepath.Join(t.TempDir(), "holon.db")
	env := []string{"HOLON_REGISTRY=" + registry, "HOLON_ENV=development"}
	args := []string{"--addr", "127.0.0.1:0", "--db", db, "--mandates", mandates, "--shutdown-timeout", "4s"}
	first := startChild(t, env, args...)
	for i := 0; i < 2; i++ {
		first.expect(t, "WATCHDOG=1", 5*time.Second)
	}
	api := "http://" + first.addr

	// Four calls that finish within the bound, two that cannot.
	type answer struct {
		code    int
		receipt string
		err     error
	}
	answers := make(chan answer, 6)
	var wg sync.WaitGroup
	c := &http.Client{Timeout: 60 * time.Second}
	for i, ms := range []int{1000, 1000, 1000, 1000, 60000, 60000} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			body := fmt.Sprintf(`{"mandate":"ops/test","agent":"ops-test/slow","input":{"ms":%d,"word":"w%d"}}`, ms, i)
			resp, err := c.Post(api+"/v0/calls", "application/json", strings.NewReader(body))
			if err != nil {
				answers <- answer{err: err}
				return
			}
			defer resp.Body.Close()
			var out struct {
				Receipt struct{ ID, Status string }
			}
			err = json.NewDecoder(resp.Body).Decode(&out)
			answers <- answer{code: resp.StatusCode, receipt: out.Receipt.ID, err: err}
		}()
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		holds, _ := metricValue(scrape(t, api+"/metrics", ""), "holon_holds_open", nil)
		if holds == 6 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("holds open: %v, want the 6 calls running", holds)
		}
		time.Sleep(50 * time.Millisecond)
	}

	if err := first.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	first.expect(t, "STOPPING=1", 5*time.Second)
	// New requests are refused from now on (the listener is closed).
	refused := false
	for end := time.Now().Add(2 * time.Second); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		conn, err := net.DialTimeout("tcp", first.addr, 200*time.Millisecond)
		if err != nil {
			refused = true
			break
		}
		conn.Close()
	}
	if !refused {
		t.Error("holon serve still accepts connections after STOPPING=1")
	}
	wg.Wait()
	close(answers)
	var finished []string
	cut := 0
	for a := range answers {
		switch {
		case a.err == nil && a.code == http.StatusOK:
			finished = append(finished, a.receipt)
		case a.err != nil:
			cut++
		default:
			t.Errorf("a call answered %d, %q", a.code, a.receipt)
		}
	}
	if len(finished) != 4 || cut != 2 {
		t.Errorf("%d calls finished and %d were cut; want 4 and 2", len(finished), cut)
	}
	first.wait(t, 10*time.Second)
	if log := first.stderr.String(); !strings.Contains(log, "shutdown bound reached") || !strings.Contains(log, "calls=2") {
		t.Errorf("the log does not say 2 calls were cut short:\n%s", log)
	}

	// Restart on the same store.
	second := startChild(t, env, args...)
	api = "http://" + second.addr
	m := scrape(t, api+"/metrics", "")
	if v, _ := metricValue(m, "holon_calls_closed_at_start", nil); v != 0 {
		t.Errorf("holon_calls_closed_at_start = %v, want 0 (the calls cut short were never in the store)", v)
	}
	if v, _ := metricValue(m, "holon_holds_open", nil); v != 0 {
		t.Errorf("holon_holds_open = %v after the restart", v)
	}
	var page holon.ReceiptPage
	do(t, c, "GET", api+"/v0/receipts?limit=500", "", nil, &page)
	byID := map[string]*holon.Receipt{}
	restarted := 0
	for _, r := range page.Receipts {
		byID[r.ID] = r
		switch {
		case r.Status == holon.StatusSucceeded:
		case r.Status == holon.StatusFailed && r.Error != nil && *r.Error == holon.CodeGatewayRestarted:
			restarted++
			if r.Billed || r.Cost.Total != 0 {
				t.Errorf("%s was cut short and billed %s", r.ID, r.Cost.Total)
			}
		default:
			t.Errorf("receipt %s is %s after the restart", r.ID, r.Status)
		}
	}
	if len(page.Receipts) != 4 || restarted != 0 {
		t.Errorf("%d receipts, %d closed as gateway_restarted; want the 4 answered and none", len(page.Receipts), restarted)
	}
	for _, id := range finished {
		if r := byID[id]; r == nil || r.Status != holon.StatusSucceeded || !r.Billed {
			t.Errorf("the answered receipt %s is %+v after the restart", id, r)
		}
	}
	if err := second.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	second.expect(t, "STOPPING=1", 5*time.Second)
	second.wait(t, 10*time.Second)

	// The store itself: no hold, nothing held, and ops paid 4 × 0.01.
	s, err := kv.Open(db, kv.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	storetest.CheckMoney(t, s.Holon())
	err = s.View(func(tx *kv.Tx) error {
		holds, err := tx.Holds()
		if err != nil {
			return err
		}
		if len(holds) != 0 {
			t.Errorf("%d holds survive", len(holds))
		}
		acct, err := tx.Account("ops")
		if err != nil {
			return err
		}
		if want := journal.MustParseAmount("4.96"); acct.Held != 0 || acct.Balance != want {
			t.Errorf("ops: balance %s held %s, want 4.96 and 0", acct.Balance, acct.Held)
		}
		b, err := tx.Budget("ops/test")
		if err != nil {
			return err
		}
		if b.Reserved != 0 || b.Spent != journal.MustParseAmount("0.04") {
			t.Errorf("ops/test: spent %s reserved %s, want 0.04 and 0", b.Spent, b.Reserved)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
