package remote

import (
	"context"
	"net"
	"net/netip"
)

// ForgetIdleConnections closes the runner's idle connections, as its HTTP
// transport does by itself moments after an agent closes them: a test that
// restarts an agent calls it to stand for those moments, instead of racing
// them.
func (r *MCPRunner) ForgetIdleConnections() { r.http.closeIdle() }

// ConnectSkippingLookupCheck connects to an address as a guarded dial
// does once the resolver's answers passed their check, without that
// check: a test reaches the socket-level check behind it (controlAddr),
// as a name rebound between the lookup and the connect would.
func (g *NetGuard) ConnectSkippingLookupCheck(ctx context.Context, network, address string) (net.Conn, error) {
	host, port, err := net.SplitHostPort(address)
	if err != nil {
		return nil, err
	}
	return g.connect(ctx, network, []netip.Addr{netip.MustParseAddr(host)}, port, true)
}
