package appliance_test

import (
	"context"
	"net"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"holon.dev/holon"
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

// unreachableStore is a store whose database can be made unreachable:
// every read and write then fails store_unavailable, as a PostgreSQL
// store's do while the server is down.
type unreachableStore struct {
	holon.Store
	down atomic.Bool
}

func (s *unreachableStore) View(fn func(holon.Tx) error) error {
	if s.down.Load() {
		return holon.Errorf(holon.CodeStoreUnavailable, "down")
	}
	return s.Store.View(fn)
}

func (s *unreachableStore) Update(ctx context.Context, fn func(holon.Tx) error) error {
	if s.down.Load() {
		return holon.Errorf(holon.CodeStoreUnavailable, "down")
	}
	return s.Store.Update(ctx, fn)
}

// Ensure that the watchdog goes on pinging while the store's database
// cannot be reached: the gateway answers 503 and recovers on its own,
// which a restart by systemd would not do better.
func TestApp_Watchdog_PingsWhileTheDatabaseIsUnreachable(t *testing.T) {
	var us *unreachableStore
	open := func(path string, opts holon.StoreOptions) (holon.Store, error) {
		s, err := kv.OpenStore(path, opts)
		us = &unreachableStore{Store: s}
		return us, err
	}
	app, err := appliance.Open(context.Background(), appliance.Config{OpenStore: open, Backup: backup.StoreHandler, DB: filepath.Join(t.TempDir(), "holon.db"), NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer app.Close()
	sock := listenNotify(t, filepath.Join(t.TempDir(), "notify"))
	n := ops.NewNotifier(notifyEnv(map[string]string{"NOTIFY_SOCKET": sock.name}))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { app.Watchdog(ctx, n, 20*time.Millisecond); close(done) }()
	us.down.Store(true)
	if err := app.CheckStore(ctx); holon.ErrorCode(err) != holon.CodeStoreUnavailable {
		t.Fatalf("CheckStore with the database down: %v", err)
	}
	for i := 0; i < 3; i++ {
		if got := sock.next(2 * time.Second); got != "WATCHDOG=1\n" {
			t.Fatalf("ping %d with the database down: %q", i, got)
		}
	}
	cancel()
	<-done
}
