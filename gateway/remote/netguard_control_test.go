package remote_test

import (
	"context"
	"errors"
	"net"
	"strconv"
	"testing"
	"time"

	"holon.dev/holon/gateway/remote"
)

// Ensure that the socket-level check, the second line behind the check
// of the resolver's answers, refuses on its own: with the lookup's check
// skipped (as a name rebound between the lookup and the connect would
// skip it), a guarded connect to a loopback listener, by IPv4, IPv6 or an
// IPv4-mapped IPv6 address, is refused before any connection, naming
// the address; and that the same connect with the policy lifted, or with
// a caller's own dialer, is the caller's business and goes through.
func TestNetGuard_SocketCheck(t *testing.T) {
	v4, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { v4.Close() })
	port := v4.Addr().(*net.TCPAddr).Port
	accepted := make(chan net.Conn, 8)
	go func() {
		for {
			c, err := v4.Accept()
			if err != nil {
				return
			}
			accepted <- c
		}
	}()
	ctx := context.Background()
	var g remote.NetGuard
	addrs := []string{v4.Addr().String(), net.JoinHostPort("::ffff:127.0.0.1", strconv.Itoa(port))}
	if v6, err := net.Listen("tcp6", "[::1]:0"); err == nil { // where the machine has IPv6 loopback
		t.Cleanup(func() { v6.Close() })
		go func() {
			if c, err := v6.Accept(); err == nil {
				accepted <- c
			}
		}()
		addrs = append(addrs, v6.Addr().String())
	}
	for _, addr := range addrs {
		c, err := g.ConnectSkippingLookupCheck(ctx, "tcp", addr)
		var b *remote.BlockedAddressError
		if err == nil {
			c.Close()
			t.Errorf("connect %s with the lookup's check skipped: connected, want refused by the socket's check", addr)
		} else if !errors.As(err, &b) || !b.Addr.Unmap().IsLoopback() {
			t.Errorf("connect %s: %v, want a BlockedAddressError naming the loopback address", addr, err)
		}
	}
	select {
	case c := <-accepted:
		c.Close()
		t.Error("the loopback listener was reached")
	case <-time.After(100 * time.Millisecond):
	}
	// A caller's own dialer is not the guard's: it connects.
	own := remote.NetGuard{Dialer: &net.Dialer{}}
	c, err := own.ConnectSkippingLookupCheck(ctx, "tcp", v4.Addr().String())
	if err != nil {
		t.Fatalf("connect with the caller's own dialer: %v", err)
	}
	c.Close()
	(<-accepted).Close()
}
