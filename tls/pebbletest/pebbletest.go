// Package pebbletest runs Let's Encrypt's test CA, pebble, in the test's
// process: a real ACME server that validates HTTP-01 and TLS-ALPN-01
// challenges against the gateway's real listeners on loopback, with a DNS
// server that resolves every name (such as gw.example.com) to 127.0.0.1.
// For tests only.
package pebbletest

import (
	"crypto/x509"
	"encoding/pem"
	"io"
	"log"
	"net"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/letsencrypt/pebble/v2/ca"
	"github.com/letsencrypt/pebble/v2/db"
	"github.com/letsencrypt/pebble/v2/va"
	"github.com/letsencrypt/pebble/v2/wfe"
	"github.com/miekg/dns"
)

// Options configure the CA.
type Options struct {
	// HTTPPort and TLSPort are where the CA validates HTTP-01 and
	// TLS-ALPN-01 challenges: the gateway's listeners.
	HTTPPort, TLSPort int
	// Validity is the lifetime of the certificates issued (pebble's
	// default, 90 days, when 0). Short ones make renewals happen in a test.
	Validity time.Duration
	// Log receives pebble's own log (discarded when nil).
	Log io.Writer
}

// CA is a running pebble.
type CA struct {
	// URL is the ACME directory.
	URL string
	// ServerRoots trust the ACME server's own HTTPS (hand them to the
	// ACME client); ServerRootsPEM is the same as a PEM file's content.
	ServerRoots    *x509.CertPool
	ServerRootsPEM []byte
	ca             *ca.CAImpl
	srv            *httptest.Server
}

// Start runs pebble and its DNS server until the test ends. It sets
// pebble's environment for speed and for fresh challenges every order
// (no random sleeps, no bad nonces, no authorization reuse).
func Start(t testing.TB, opts Options) *CA {
	t.Helper()
	t.Setenv("PEBBLE_VA_NOSLEEP", "1")
	t.Setenv("PEBBLE_WFE_NONCEREJECT", "0")
	t.Setenv("PEBBLE_AUTHZREUSE", "0")
	t.Setenv("PEBBLE_VA_ALWAYS_VALID", "0")
	out := opts.Log
	if out == nil {
		out = io.Discard
	}
	logger := log.New(out, "pebble ", log.LstdFlags)
	resolver := startDNS(t)
	store := db.NewMemoryStore()
	profiles := map[string]ca.Profile{"default": {Description: "test profile", ValidityPeriod: uint64(opts.Validity / time.Second)}}
	authority := ca.New(logger, store, "", "ecdsa", 0, 1, profiles)
	validator := va.New(logger, opts.HTTPPort, opts.TLSPort, false, resolver, store)
	front := wfe.New(logger, store, validator, authority, []string{"pebble.letsencrypt.org"}, false, false, 0, 0)
	srv := httptest.NewTLSServer(front.Handler())
	t.Cleanup(srv.Close)
	pool := x509.NewCertPool()
	pool.AddCert(srv.Certificate())
	return &CA{
		URL:            srv.URL + wfe.DirectoryPath,
		ServerRoots:    pool,
		ServerRootsPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}),
		ca:             authority,
		srv:            srv,
	}
}

// Close stops the ACME server: its URL refuses connections from then on.
func (c *CA) Close() { c.srv.Close() }

// Roots are the roots of the certificates the CA issues: a client that
// trusts them (and no other) proves the gateway serves a certificate
// from this CA.
func (c *CA) Roots() *x509.CertPool {
	pool := x509.NewCertPool()
	pool.AddCert(c.ca.GetRootCert(0).Cert)
	return pool
}

// startDNS serves A 127.0.0.1 for every name, and empty answers for the
// other types (no AAAA, no CAA), over TCP as pebble asks.
func startDNS(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	mux := dns.NewServeMux()
	mux.HandleFunc(".", func(w dns.ResponseWriter, req *dns.Msg) {
		m := new(dns.Msg)
		m.SetReply(req)
		for _, q := range req.Question {
			if q.Qtype == dns.TypeA {
				m.Answer = append(m.Answer, &dns.A{
					Hdr: dns.RR_Header{Name: q.Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 60},
					A:   net.IPv4(127, 0, 0, 1),
				})
			}
		}
		_ = w.WriteMsg(m)
	})
	srv := &dns.Server{Listener: ln, Handler: mux}
	go func() { _ = srv.ActivateAndServe() }()
	t.Cleanup(func() { _ = srv.Shutdown() })
	return ln.Addr().String()
}

// FreePort returns a loopback port that nothing listens on (for a
// listener the CA must know of before it starts).
func FreePort(t testing.TB) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}
