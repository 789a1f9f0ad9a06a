package appliance_test

import (
	"context"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"holon.dev/holon/appliance"
	"holon.dev/holon/appliance/ops"
	"holon.dev/holon/backup"
	"holon.dev/holon/kv"
)

// notifySocket is a service manager's end of $NOTIFY_SOCKET: a unixgram
// socket that collects datagrams.
type notifySocket struct {
	conn *net.UnixConn
	name string
}

func listenNotify(t *testing.T, name string) *notifySocket {
	t.Helper()
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: name, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return &notifySocket{conn: conn, name: name}
}

// next reads one datagram, or "" after the timeout.
func (s *notifySocket) next(timeout time.Duration) string {
	buf := make([]byte, 4096)
	s.conn.SetReadDeadline(time.Now().Add(timeout))
	n, _, err := s.conn.ReadFromUnix(buf)
	if err != nil {
		return ""
	}
	return string(buf[:n])
}

func notifyEnv(kv map[string]string) func(string) string {
	return func(k string) string { return kv[k] }
}

// Ensure that Notify sends its states as one datagram of NAME=value lines
// to a path or an abstract socket, does nothing without $NOTIFY_SOCKET, and
// refuses a state that is not one line.
func TestNotifier_Notify(t *testing.T) {
	for _, name := range []string{filepath.Join(t.TempDir(), "notify"), "@holon-test-" + strings.ReplaceAll(t.Name(), "/", "-")} {
		sock := listenNotify(t, name)
		n := ops.NewNotifier(notifyEnv(map[string]string{"NOTIFY_SOCKET": name}))
		if !n.Enabled() {
			t.Fatal("not enabled")
		}
		if err := n.Notify("READY=1", "STATUS=serving on 127.0.0.1:8080"); err != nil {
			t.Fatal(err)
		}
		if got := sock.next(time.Second); got != "READY=1\nSTATUS=serving on 127.0.0.1:8080\n" {
			t.Errorf("%s: got %q", name, got)
		}
		if err := n.Notify("STATUS=two\nlines"); err == nil {
			t.Error("a state with a newline was sent")
		}
	}
	off := ops.NewNotifier(notifyEnv(nil))
	if off.Enabled() || off.Notify("READY=1") != nil {
		t.Error("without NOTIFY_SOCKET the notifier must do nothing")
	}
	if err := ops.NewNotifier(notifyEnv(map[string]string{"NOTIFY_SOCKET": filepath.Join(t.TempDir(), "none")})).Notify("READY=1"); err == nil {
		t.Error("a socket nobody listens on gave no error")
	}
}

// Ensure that WatchdogInterval is half of $WATCHDOG_USEC, only for the
// process $WATCHDOG_PID names, and refuses a malformed value.
func TestWatchdogInterval(t *testing.T) {
	for _, tc := range []struct {
		env  map[string]string
		want time.Duration
		err  bool
	}{
		{nil, 0, false},
		{map[string]string{"WATCHDOG_USEC": "30000000"}, 15 * time.Second, false},
		{map[string]string{"WATCHDOG_USEC": "30000000", "WATCHDOG_PID": "42"}, 15 * time.Second, false},
		{map[string]string{"WATCHDOG_USEC": "30000000", "WATCHDOG_PID": "43"}, 0, false},
		{map[string]string{"WATCHDOG_USEC": "soon"}, 0, true},
	} {
		got, err := ops.WatchdogInterval(notifyEnv(tc.env), 42)
		if got != tc.want || (err != nil) != tc.err {
			t.Errorf("%v: %v, %v; want %v, error %v", tc.env, got, err, tc.want, tc.err)
		}
	}
}

// Ensure that the watchdog pings after each successful check of the store,
// and stops pinging once the store no longer answers.
func TestApp_Watchdog_PingsOnlyAfterStoreCheck(t *testing.T) {
	app, err := appliance.Open(context.Background(), appliance.Config{OpenStore: kv.OpenStore, Backup: backup.StoreHandler, DB: filepath.Join(t.TempDir(), "holon.db"), NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	sock := listenNotify(t, filepath.Join(t.TempDir(), "notify"))
	n := ops.NewNotifier(notifyEnv(map[string]string{"NOTIFY_SOCKET": sock.name}))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { app.Watchdog(ctx, n, 20*time.Millisecond); close(done) }()
	for i := 0; i < 3; i++ {
		if got := sock.next(2 * time.Second); got != "WATCHDOG=1\n" {
			t.Fatalf("ping %d: %q", i, got)
		}
	}
	if err := app.CheckStore(ctx); err != nil {
		t.Errorf("CheckStore on an open store: %v", err)
	}
	app.Close()
	// One ping may have been in flight; after it, silence.
	sock.next(100 * time.Millisecond)
	if got := sock.next(300 * time.Millisecond); got != "" {
		t.Errorf("pinged %q with the store closed", got)
	}
	if err := app.CheckStore(ctx); err == nil {
		t.Error("CheckStore on a closed store: no error")
	}
	cancel()
	<-done
}
