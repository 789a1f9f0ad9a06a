package ops

import (
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"
)

// Notifier tells systemd how the service is doing, through the datagram
// socket named by $NOTIFY_SOCKET (the sd_notify(3) protocol: one datagram
// of NAME=value lines). Without $NOTIFY_SOCKET, as outside a Type=notify
// unit, it does nothing.
type Notifier struct {
	socket string
}

// NewNotifier reads $NOTIFY_SOCKET. A name that starts with "@" is in the
// abstract namespace.
func NewNotifier(getenv func(string) string) *Notifier {
	return &Notifier{socket: getenv("NOTIFY_SOCKET")}
}

// Enabled reports whether a service manager listens.
func (n *Notifier) Enabled() bool { return n != nil && n.socket != "" }

// Notify sends states such as "READY=1", "WATCHDOG=1", "STOPPING=1" or
// "STATUS=…" in one datagram.
func (n *Notifier) Notify(states ...string) error {
	if !n.Enabled() {
		return nil
	}
	if n.socket[0] != '/' && n.socket[0] != '@' {
		return fmt.Errorf("NOTIFY_SOCKET %q is neither a path nor an abstract socket", n.socket)
	}
	for _, s := range states {
		if !strings.Contains(s, "=") || strings.Contains(s, "\n") {
			return fmt.Errorf("sd_notify: %q is not one NAME=value line", s)
		}
	}
	conn, err := net.DialUnix("unixgram", nil, &net.UnixAddr{Name: n.socket, Net: "unixgram"})
	if err != nil {
		return fmt.Errorf("sd_notify: %w", err)
	}
	defer conn.Close()
	if _, err := conn.Write([]byte(strings.Join(states, "\n") + "\n")); err != nil {
		return fmt.Errorf("sd_notify: %w", err)
	}
	return nil
}

// WatchdogInterval is how often to ping systemd's watchdog: half of
// $WATCHDOG_USEC, as sd_watchdog_enabled(3) advises, when $WATCHDOG_PID is
// unset or names this process; 0 when no watchdog is asked for.
func WatchdogInterval(getenv func(string) string, pid int) (time.Duration, error) {
	us := getenv("WATCHDOG_USEC")
	if us == "" {
		return 0, nil
	}
	if p := getenv("WATCHDOG_PID"); p != "" && p != strconv.Itoa(pid) {
		return 0, nil // meant for another process
	}
	n, err := strconv.ParseInt(us, 10, 64)
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("WATCHDOG_USEC: %q is not a positive number of microseconds", us)
	}
	return time.Duration(n) * time.Microsecond / 2, nil
}
