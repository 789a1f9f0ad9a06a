package remote

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// The guarded network client (gateway.md §7 "Network safety"): every
// connection to a remote agent checks the address it actually connects to,
// on every dial, so that a name which resolved to a public address at
// publish time and resolves to a private one now (DNS rebinding) is refused
// at call time.

// refusedRange is one block of addresses a published agent may not live in.
type refusedRange struct {
	prefix netip.Prefix
	why    string
}

func mustRanges(rs ...[2]string) []refusedRange {
	out := make([]refusedRange, len(rs))
	for i, r := range rs {
		out[i] = refusedRange{prefix: netip.MustParsePrefix(r[0]), why: r[1]}
	}
	return out
}

// refusedV4 are the IPv4 ranges that are not the public internet (the IANA
// special-purpose registry, RFC 6890, and the cloud metadata addresses).
var refusedV4 = mustRanges(
	[2]string{"0.0.0.0/8", `"this network" (0.0.0.0/8)`},
	[2]string{"10.0.0.0/8", "private network (RFC 1918)"},
	[2]string{"100.64.0.0/10", "carrier-grade NAT (RFC 6598)"},
	[2]string{"127.0.0.0/8", "loopback"},
	[2]string{"169.254.169.254/32", "cloud metadata"},
	[2]string{"169.254.0.0/16", "link-local"},
	[2]string{"172.16.0.0/12", "private network (RFC 1918)"},
	[2]string{"192.0.0.0/24", "IETF protocol assignments (RFC 6890)"},
	[2]string{"192.0.2.0/24", "documentation (TEST-NET-1)"},
	[2]string{"192.88.99.0/24", "6to4 relay anycast (deprecated)"},
	[2]string{"192.168.0.0/16", "private network (RFC 1918)"},
	[2]string{"198.18.0.0/15", "benchmarking (RFC 2544)"},
	[2]string{"198.51.100.0/24", "documentation (TEST-NET-2)"},
	[2]string{"203.0.113.0/24", "documentation (TEST-NET-3)"},
	[2]string{"168.63.129.16/32", "cloud metadata (Azure wire server)"},
	[2]string{"224.0.0.0/4", "multicast"},
	[2]string{"255.255.255.255/32", "broadcast"},
	[2]string{"240.0.0.0/4", "reserved (240.0.0.0/4)"},
)

// refusedV6 are the IPv6 ranges refused outright. Besides them, only global
// unicast (2000::/3) and the NAT64 prefix are reachable at all; the forms
// that embed an IPv4 address (mapped, NAT64, 6to4) are judged by it.
var refusedV6 = mustRanges(
	[2]string{"::/128", "unspecified"},
	[2]string{"::1/128", "loopback"},
	[2]string{"::/96", "IPv4-compatible (deprecated)"},
	[2]string{"64:ff9b:1::/48", "local-use NAT64 (RFC 8215)"},
	[2]string{"100::/64", "discard-only (RFC 6666)"},
	[2]string{"2001:db8::/32", "documentation"},
	[2]string{"2001::/23", "IETF protocol assignments (Teredo, benchmarking, ORCHID)"},
	[2]string{"3fff::/20", "documentation (RFC 9637)"},
	[2]string{"5f00::/16", "segment routing (SRv6 SIDs)"},
	[2]string{"fd00:ec2::254/128", "cloud metadata"},
	[2]string{"fc00::/7", "unique local"},
	[2]string{"fe80::/10", "link-local"},
	[2]string{"fec0::/10", "site-local (deprecated)"},
	[2]string{"ff00::/8", "multicast"},
)

var (
	globalUnicast = netip.MustParsePrefix("2000::/3")
	nat64         = netip.MustParsePrefix("64:ff9b::/96")
	sixToFour     = netip.MustParsePrefix("2002::/16")
)

// BlockedAddressError is a connection the guard refused: the address is
// not on the public internet.
type BlockedAddressError struct {
	// Addr is the address that was refused.
	Addr netip.Addr
	// Host is the name that resolved to it ("" when dialled by address).
	Host string
	// Why names the range it is in.
	Why string
}

// Error names the address, the host that resolved to it, and its range.
func (e *BlockedAddressError) Error() string {
	what := e.Addr.String()
	if e.Host != "" && e.Host != what {
		what = fmt.Sprintf("%s (%s)", e.Host, what)
	}
	return fmt.Sprintf("refused to connect to %s: %s address; remote agents must be on public addresses (HOLON_ALLOW_PRIVATE_ENDPOINTS=1 lifts this for local development)", what, e.Why)
}

// CheckAddr reports why an address is refused to remote agents, or nil for
// a public address. IPv4 addresses inside IPv6 (mapped, NAT64, 6to4) are
// judged by the IPv4 address they carry.
func CheckAddr(a netip.Addr) error {
	if why := refusedWhy(a); why != "" {
		return &BlockedAddressError{Addr: a, Why: why}
	}
	return nil
}

func refusedWhy(a netip.Addr) string {
	if !a.IsValid() {
		return "invalid"
	}
	a = a.WithZone("")
	if a.Is4In6() {
		if why := refusedWhy(a.Unmap()); why != "" {
			return "IPv4-mapped " + why
		}
		return ""
	}
	if a.Is4() {
		for _, r := range refusedV4 {
			if r.prefix.Contains(a) {
				return r.why
			}
		}
		return ""
	}
	for _, r := range refusedV6 {
		if r.prefix.Contains(a) {
			return r.why
		}
	}
	b := a.As16()
	switch {
	case nat64.Contains(a):
		if why := refusedWhy(netip.AddrFrom4([4]byte{b[12], b[13], b[14], b[15]})); why != "" {
			return "NAT64-embedded " + why
		}
		return ""
	case sixToFour.Contains(a):
		if why := refusedWhy(netip.AddrFrom4([4]byte{b[2], b[3], b[4], b[5]})); why != "" {
			return "6to4-embedded " + why
		}
		return ""
	case !globalUnicast.Contains(a):
		return "reserved IPv6 (outside global unicast 2000::/3)"
	}
	return ""
}

// Resolver looks up a host's addresses; *net.Resolver is one.
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// ContextDialer opens a connection; *net.Dialer is one.
type ContextDialer interface {
	DialContext(ctx context.Context, network, address string) (net.Conn, error)
}

// NetGuard is the address policy of the connections to remote agents, with
// the resolver and dialer it uses (both replaceable, for tests).
type NetGuard struct {
	// AllowPrivate lifts the policy for local development
	// (HOLON_ALLOW_PRIVATE_ENDPOINTS=1): every address may be dialled.
	AllowPrivate bool
	// Resolver resolves host names (net.DefaultResolver when nil).
	Resolver Resolver
	// Dialer connects to an address the guard checked. When nil, a
	// net.Dialer whose Control checks the socket's address once more, just
	// before it connects.
	Dialer ContextDialer
}

// dialTimeout bounds one TCP connect; the run's hard timeout bounds the rest.
const dialTimeout = 10 * time.Second

func (g *NetGuard) resolver() Resolver {
	if g.Resolver != nil {
		return g.Resolver
	}
	return net.DefaultResolver
}

// DialContext is the guarded dial: it resolves the host, refuses the whole
// dial when any of its addresses is not public (a name that mixes public and
// private answers is a rebinding attempt), and connects to the checked
// address itself, never to the name, so the address checked is the address
// connected to.
func (g *NetGuard) DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	return g.dial(ctx, network, address, !g.AllowPrivate)
}

// DialOpen dials without the address policy: for agents shipped with the
// gateway, which are exempt (gateway.md §7).
func (g *NetGuard) DialOpen(ctx context.Context, network, address string) (net.Conn, error) {
	return g.dial(ctx, network, address, false)
}

func (g *NetGuard) dial(ctx context.Context, network, address string, guarded bool) (net.Conn, error) {
	host, port, err := net.SplitHostPort(address)
	if err != nil {
		return nil, err
	}
	addrs, err := g.lookup(ctx, network, host)
	if err != nil {
		return nil, err
	}
	if guarded {
		for _, a := range addrs {
			if err := CheckAddr(a); err != nil {
				err.(*BlockedAddressError).Host = host
				return nil, &net.OpError{Op: "dial", Net: network, Err: err}
			}
		}
	}
	return g.connect(ctx, network, addrs, port, guarded)
}

// connect dials the addresses a lookup gave, in order, until one answers;
// guarded, with no Dialer of the caller's, each socket checks its own
// address just before it connects (controlAddr), the second line behind
// the check of the lookup's answers.
func (g *NetGuard) connect(ctx context.Context, network string, addrs []netip.Addr, port string, guarded bool) (net.Conn, error) {
	d := g.Dialer
	if d == nil {
		nd := &net.Dialer{Timeout: dialTimeout, KeepAlive: 30 * time.Second}
		if guarded {
			nd.Control = controlAddr
		}
		d = nd
	}
	pn, err := strconv.ParseUint(port, 10, 16)
	if err != nil {
		return nil, fmt.Errorf("dial: bad port %q", port)
	}
	var firstErr error
	for _, a := range addrs {
		c, err := d.DialContext(ctx, network, netip.AddrPortFrom(a, uint16(pn)).String())
		if err == nil {
			return c, nil
		}
		if firstErr == nil {
			firstErr = err
		}
		if ctx.Err() != nil {
			break
		}
	}
	return nil, firstErr
}

// lookup resolves host, or parses it when it is an address already.
func (g *NetGuard) lookup(ctx context.Context, network, host string) ([]netip.Addr, error) {
	if a, err := netip.ParseAddr(strings.Trim(host, "[]")); err == nil {
		return []netip.Addr{a}, nil
	}
	ipnet := "ip"
	switch network {
	case "tcp4":
		ipnet = "ip4"
	case "tcp6":
		ipnet = "ip6"
	}
	addrs, err := g.resolver().LookupNetIP(ctx, ipnet, host)
	if err != nil {
		return nil, err
	}
	if len(addrs) == 0 {
		return nil, &net.DNSError{Err: "no addresses", Name: host, IsNotFound: true}
	}
	return addrs, nil
}

// CheckHost resolves a host name (or parses an address) and refuses it
// when any of its addresses is not public: the publish-time check of
// runtime.endpoint ("resolves only to public addresses").
func (g *NetGuard) CheckHost(ctx context.Context, host string) error {
	addrs, err := g.lookup(ctx, "tcp", host)
	if err != nil {
		return fmt.Errorf("resolve %s: %w", host, err)
	}
	for _, a := range addrs {
		if err := CheckAddr(a); err != nil {
			err.(*BlockedAddressError).Host = host
			return err
		}
	}
	return nil
}

// controlAddr is the last check, on the socket itself, just before it
// connects: the address the kernel is asked to connect to.
func controlAddr(network, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("guarded dial: unparsable address %q", address)
	}
	return CheckAddr(ap.Addr())
}

// blockedAddress finds a refused address in an error chain.
func blockedAddress(err error) (*BlockedAddressError, bool) {
	var b *BlockedAddressError
	ok := errors.As(err, &b)
	return b, ok
}
