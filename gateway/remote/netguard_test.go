package remote_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"holon.dev/holon/gateway"
	"holon.dev/holon/gateway/contract"
	"holon.dev/holon/gateway/remote"
)

// fakeResolver answers host names from a table; a host with several answers
// gets the next one on each lookup (the last one repeats): a name that
// rebinds.
type fakeResolver struct {
	mu      sync.Mutex
	answers map[string][][]netip.Addr
	lookups map[string]int
}

func newFakeResolver(answers map[string][]string) *fakeResolver {
	r := &fakeResolver{answers: map[string][][]netip.Addr{}, lookups: map[string]int{}}
	for host, as := range answers {
		for _, a := range as {
			var set []netip.Addr
			for _, s := range strings.Split(a, ",") {
				set = append(set, netip.MustParseAddr(s))
			}
			r.answers[host] = append(r.answers[host], set)
		}
	}
	return r
}

func (r *fakeResolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	as, ok := r.answers[host]
	if !ok {
		return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	}
	i := min(r.lookups[host], len(as)-1)
	r.lookups[host]++
	return as[i], nil
}

// fakeDialer records every address it is asked to dial and connects each
// one to a loopback server (to), standing in for the public internet; with
// no server, it fails every dial.
type fakeDialer struct {
	to    string
	mu    sync.Mutex
	dials []string
}

func (d *fakeDialer) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	d.mu.Lock()
	d.dials = append(d.dials, addr)
	d.mu.Unlock()
	if d.to == "" {
		return nil, errors.New("test dialer: no connection was expected")
	}
	var nd net.Dialer
	return nd.DialContext(ctx, network, d.to)
}

func (d *fakeDialer) Dials() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]string(nil), d.dials...)
}

// refusedAddrs are addresses of every refused range, in IPv4, IPv6 and the
// IPv6 forms that embed an IPv4 address.
var refusedAddrs = []string{
	// IPv4
	"0.0.0.0", "0.1.2.3", "10.0.0.1", "10.255.255.255", "100.64.0.1", "100.127.255.254",
	"127.0.0.1", "127.8.9.10", "169.254.0.1", "169.254.169.254", "172.16.0.1", "172.31.255.255",
	"192.0.0.170", "192.0.2.1", "192.88.99.1", "192.168.0.1", "192.168.255.255", "198.18.0.1",
	"198.19.255.255", "198.51.100.7", "203.0.113.9", "168.63.129.16", "224.0.0.1", "239.255.255.250",
	"240.0.0.1", "250.1.2.3", "255.255.255.255",
	// IPv6
	"::", "::1", "fe80::1", "fe80::1%eth0", "fc00::1", "fd12:3456::1", "fd00:ec2::254", "ff02::1", "ff05::2",
	"2001:db8::1", "2001:db8:ffff::1", "3fff::1", "fec0::1", "100::1", "2001::1", "2001:2::1",
	"64:ff9b:1::1", "5f00::1", "4000::1", "::2",
	// IPv4-mapped IPv6
	"::ffff:127.0.0.1", "::ffff:10.0.0.1", "::ffff:169.254.169.254", "::ffff:192.168.1.1",
	"::ffff:172.16.5.4", "::ffff:100.64.0.1", "::ffff:0.0.0.0", "::ffff:224.0.0.1", "::ffff:198.51.100.1",
	"::ffff:203.0.113.1", "::ffff:192.0.2.1", "::ffff:198.18.0.1", "::ffff:240.0.0.1", "::ffff:255.255.255.255",
	// IPv4-compatible, NAT64 and 6to4 embeddings
	"::127.0.0.1", "::10.0.0.1",
	"64:ff9b::7f00:1", "64:ff9b::a00:1", "64:ff9b::a9fe:a9fe", "64:ff9b::c0a8:101",
	"2002:7f00:1::1", "2002:a00:1::1", "2002:a9fe:a9fe::1", "2002:c0a8:101::1", "2002:6440:1::1",
}

// publicAddrs are addresses the guard lets through.
var publicAddrs = []string{
	"1.1.1.1", "8.8.8.8", "93.184.216.34", "100.128.0.1", "172.32.0.1", "192.169.0.1", "198.20.0.1",
	"2606:4700:4700::1111", "2a00:1450:4001::200e", "::ffff:8.8.8.8", "64:ff9b::808:808", "2002:808:808::1",
}

// Ensure that CheckAddr refuses every address of a refused range, in every
// form, and lets public addresses through.
func TestCheckAddr(t *testing.T) {
	for _, s := range refusedAddrs {
		a := netip.MustParseAddr(s)
		err := remote.CheckAddr(a)
		var b *remote.BlockedAddressError
		if !errors.As(err, &b) {
			t.Errorf("%s: %v, want refused", s, err)
			continue
		}
		if !strings.Contains(err.Error(), a.WithZone("").String()) && !strings.Contains(err.Error(), s) {
			t.Errorf("%s: %q does not name the address", s, err)
		}
	}
	for _, s := range publicAddrs {
		if err := remote.CheckAddr(netip.MustParseAddr(s)); err != nil {
			t.Errorf("%s: %v, want allowed", s, err)
		}
	}
}

// hostPort writes an address as a URL host.
func hostPort(s string) string {
	a := netip.MustParseAddr(s)
	if a.Is4() {
		return s
	}
	return "[" + strings.ReplaceAll(s, "%", "%25") + "]"
}

// Ensure that a call to a remote agent at any refused address, given as an
// address in the endpoint or as a name that resolves to it, is refused at
// dial time, before any connection, as runtime_unavailable naming the
// address, and never billed: for webhook and mcp agents alike.
func TestNetGuard_RefusedAtDial(t *testing.T) {
	dialer := &fakeDialer{}
	names := map[string][]string{}
	var manifests []string
	type want struct{ agent, addr string }
	var wants []want
	perRun := `{model: per_run, amount: "0.10", currency: EUR}`
	for i, s := range refusedAddrs {
		name := fmt.Sprintf("agent%d.example.com", i)
		names[name] = []string{s}
		manifests = append(manifests,
			webhookManifest(fmt.Sprintf("lit%d", i), "https://"+hostPort(s)+"/hook", perRun, ""),
			mcpManifest(fmt.Sprintf("name%d", i), "https://"+name+"/mcp", "t", perRun, ""))
		wants = append(wants, want{fmt.Sprintf("lit%d", i), netip.MustParseAddr(s).WithZone("").String()},
			want{fmt.Sprintf("name%d", i), name})
	}
	names["mixed.example.com"] = []string{"93.184.216.34,10.0.0.9"}
	manifests = append(manifests, webhookManifest("mixed", "https://mixed.example.com/hook", perRun, ""))
	wants = append(wants, want{"mixed", "10.0.0.9"})
	g := openRemote(t, rmConfig{
		manifests: manifests,
		guarded:   true,
		remote:    remote.Config{Guard: remote.NetGuard{Resolver: newFakeResolver(names), Dialer: dialer}},
	})
	for _, w := range wants {
		res := g.call(t, "acme/"+w.agent, `{}`, "")
		if got := billingOf(res.Receipt); got != (billing{"failed", "runtime_unavailable", false, "0.00"}) {
			t.Errorf("%s: %v (%s), want runtime_unavailable", w.agent, got, res.Message)
			continue
		}
		if !strings.Contains(res.Message, w.addr) || !strings.Contains(res.Message, "refused to connect") {
			t.Errorf("%s: message %q does not name %s", w.agent, res.Message, w.addr)
		}
	}
	if d := dialer.Dials(); len(d) != 0 {
		t.Errorf("the guard dialled %q", d)
	}
}

// Ensure that the real resolver's answer is checked too: localhost is
// refused, at publish time (CheckHost) as at call time.
func TestNetGuard_Localhost(t *testing.T) {
	var g remote.NetGuard
	err := g.CheckHost(context.Background(), "localhost")
	var b *remote.BlockedAddressError
	if !errors.As(err, &b) || !b.Addr.IsLoopback() {
		t.Fatalf("CheckHost(localhost) = %v, want refused as loopback", err)
	}
	if _, err := g.DialContext(context.Background(), "tcp", "localhost:80"); !errors.As(err, &b) {
		t.Fatalf("dial localhost: %v, want refused", err)
	}
	pub := remote.NetGuard{Resolver: newFakeResolver(map[string][]string{"agents.example.com": {"93.184.216.34"}})}
	if err := pub.CheckHost(context.Background(), "agents.example.com"); err != nil {
		t.Fatalf("CheckHost(public) = %v", err)
	}
}

// Ensure that DNS rebinding is refused at call time: a name that resolved
// to a public address for the first call and to a private one for the
// second is refused on the second dial, naming the private address.
func TestNetGuard_Rebinding(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Connection", "close") // every call dials again
		io.WriteString(w, `{"ok":true}`)
	}))
	defer srv.Close()
	dialer := &fakeDialer{to: srv.Listener.Addr().String()}
	resolver := newFakeResolver(map[string][]string{"rebind.example.com": {"93.184.216.34", "10.0.0.7"}})
	g := openRemote(t, rmConfig{
		manifests: []string{webhookManifest("rebind", "http://rebind.example.com/hook", `{model: per_run, amount: "0.10", currency: EUR}`, "")},
		guarded:   true,
		remote:    remote.Config{Guard: remote.NetGuard{Resolver: resolver, Dialer: dialer}},
	})
	if res := g.call(t, "acme/rebind", `{}`, ""); res.Receipt.Status != "succeeded" {
		t.Fatalf("while public: %v (%s)", billingOf(res.Receipt), res.Message)
	}
	res := g.call(t, "acme/rebind", `{}`, "")
	if got := billingOf(res.Receipt); got != (billing{"failed", "runtime_unavailable", false, "0.00"}) || !strings.Contains(res.Message, "10.0.0.7") {
		t.Fatalf("after rebinding: %v (%s), want runtime_unavailable naming 10.0.0.7", got, res.Message)
	}
	if d := dialer.Dials(); len(d) != 1 || d[0] != "93.184.216.34:80" {
		t.Errorf("dials %q, want only the public address", d)
	}
}

// Ensure that HOLON_ALLOW_PRIVATE_ENDPOINTS (NetGuard.AllowPrivate) lifts
// the guard: the same loopback agents are refused without it and reached
// with it; and that agents shipped with the gateway are exempt with the
// guard on.
func TestNetGuard_PrivateSwitchAndShipped(t *testing.T) {
	agent := newMCPAgent(t, "", map[string]mcp.ToolHandler{"echo": profileTools()["echo"]})
	hook := newHookServer(t, "")
	docs := []string{
		mcpManifest("mcp", agent.URL(), "echo", `{model: free}`, ""),
		webhookManifest("hook", hook.URL+"/echo", `{model: free}`, ""),
	}
	guarded := openRemote(t, rmConfig{manifests: docs, guarded: true})
	open := openRemote(t, rmConfig{manifests: docs, guarded: true, remote: remote.Config{Guard: remote.NetGuard{AllowPrivate: true}}})
	for _, a := range []string{"acme/mcp", "acme/hook"} {
		res := guarded.call(t, a, `{"x":1}`, "")
		if got := billingOf(res.Receipt); got.code != "runtime_unavailable" || !strings.Contains(res.Message, "127.0.0.1") {
			t.Errorf("%s guarded: %v (%s), want runtime_unavailable naming 127.0.0.1", a, got, res.Message)
		}
		if res := open.call(t, a, `{"x":1}`, ""); res.Receipt.Status != "succeeded" {
			t.Errorf("%s with private endpoints allowed: %v (%s)", a, billingOf(res.Receipt), res.Message)
		}
	}

	// Shipped agents, run by a guarded runner.
	cfg := remote.Config{}
	mr, wr := remote.NewMCPRunner(cfg), remote.NewWebhookRunner(cfg)
	defer mr.Close()
	defer wr.Close()
	for _, tt := range []struct {
		doc    string
		runner gateway.Runner
	}{{docs[0], mr}, {docs[1], wr}} {
		m, err := contract.ParseManifest([]byte(tt.doc))
		if err != nil {
			t.Fatal(err)
		}
		for _, shipped := range []bool{true, false} {
			res := tt.runner.Run(context.Background(), &gateway.Invocation{Manifest: m, Input: json.RawMessage(`{"y":2}`), Receipt: "r1", Shipped: shipped})
			switch {
			case shipped && res.Outcome.Kind != contract.OutcomeOutput:
				t.Errorf("%s shipped: outcome %v (%s), want an output", m.ID, res.Outcome.Kind, res.Message)
			case !shipped && res.Outcome.Kind != contract.OutcomeUnavailable:
				t.Errorf("%s not shipped: outcome %v (%s), want unavailable", m.ID, res.Outcome.Kind, res.Message)
			}
		}
	}
}

// Ensure that an MCP endpoint that redirects is not followed: the call fails
// never billed, saying so, and the target is never reached.
func TestNetGuard_MCPRedirectNotFollowed(t *testing.T) {
	target := newMCPAgent(t, "", map[string]mcp.ToolHandler{"echo": profileTools()["echo"]})
	redirect := httptest.NewServer(http.RedirectHandler(target.URL(), http.StatusTemporaryRedirect))
	defer redirect.Close()
	g := openRemote(t, rmConfig{manifests: []string{mcpManifest("moved", redirect.URL+"/mcp", "echo", `{model: per_run, amount: "0.10", currency: EUR}`, "")}})
	res := g.call(t, "acme/moved", `{}`, "")
	if got := billingOf(res.Receipt); got.billed || got.status != "failed" || !strings.Contains(res.Message, "not followed") {
		t.Fatalf("%v (%s), want a failure saying the redirect is not followed", got, res.Message)
	}
	if n := len(target.Auth()); n != 0 {
		t.Errorf("the redirect target got %d requests", n)
	}
}
