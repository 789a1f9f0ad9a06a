package tls_test

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	cryptotls "crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"io/fs"
	"log"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	holontls "holon.dev/holon/tls"
	"holon.dev/holon/tls/pebbletest"
)

// syncBuffer collects log lines from background goroutines, which may
// outlive a test (t.Log would panic then).
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// gateway is a Manager behind real listeners on loopback: HTTP (challenges,
// then the redirect) and HTTPS (the managed certificates, then /healthz).
type gateway struct {
	httpLn, httpsLn net.Listener
	logs            *syncBuffer
}

func listen(t *testing.T) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return ln
}

func port(ln net.Listener) int { return ln.Addr().(*net.TCPAddr).Port }

func (g *gateway) serve(t *testing.T, m *holontls.Manager) {
	t.Helper()
	health := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `{"status":"ok"}`)
	})
	httpsSrv := &http.Server{Handler: health, TLSConfig: m.TLSConfig(), ErrorLog: log.New(g.logs, "https ", 0)}
	go httpsSrv.ServeTLS(g.httpsLn, "", "")
	t.Cleanup(func() { httpsSrv.Close() })
	if g.httpLn != nil {
		httpSrv := &http.Server{Handler: m.HTTPHandler(holontls.RedirectHandler(g.httpsLn.Addr().String(), m.Domains()))}
		go httpSrv.Serve(g.httpLn)
		t.Cleanup(func() { httpSrv.Close() })
	}
	if err := m.Manage(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Stop)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("logs:\n%s", g.logs.String())
		}
	})
}

// client trusts the test CA's roots only, dials the gateway's HTTPS
// listener for any name, and makes a new connection (a new handshake)
// for every request.
func client(roots *x509.CertPool, httpsAddr string) *http.Client {
	dialer := &net.Dialer{Timeout: 2 * time.Second}
	return &http.Client{
		Timeout: 5 * time.Second,
		Transport: &http.Transport{
			TLSClientConfig:   &cryptotls.Config{RootCAs: roots},
			DisableKeepAlives: true,
			DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
				return dialer.DialContext(ctx, network, httpsAddr)
			},
		},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// waitServed polls https://<domain>/healthz until it answers with a
// certificate that verifies against the CA's roots and for which accept
// returns true; it returns that certificate.
func waitServed(t *testing.T, c *http.Client, domain string, within time.Duration, accept func(*x509.Certificate) bool) *x509.Certificate {
	t.Helper()
	deadline := time.Now().Add(within)
	var last error
	for time.Now().Before(deadline) {
		resp, err := c.Get("https://" + domain + "/healthz")
		if err == nil {
			resp.Body.Close()
			leaf := resp.TLS.PeerCertificates[0]
			if resp.StatusCode == http.StatusOK && accept(leaf) {
				return leaf
			}
			last = fmt.Errorf("status %d, certificate serial %s", resp.StatusCode, leaf.SerialNumber)
		} else {
			last = err
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("https://%s/healthz: no acceptable answer within %s; last: %v", domain, within, last)
	return nil
}

// Ensure that a Manager obtains a certificate from a real ACME server by
// HTTP-01 (answered by its HTTP handler on the gateway's own listener),
// keeps it in its storage directory, serves it over HTTPS, redirects HTTP
// to HTTPS, and renews it: a new certificate is served before the first
// one expires.
func TestManager_HTTP01_ObtainServeRedirectRenew(t *testing.T) {
	g := &gateway{httpLn: listen(t), httpsLn: listen(t), logs: &syncBuffer{}}
	ca := pebbletest.Start(t, pebbletest.Options{HTTPPort: port(g.httpLn), TLSPort: port(g.httpsLn), Validity: 12 * time.Second, Log: g.logs})
	storage := t.TempDir()
	const domain = "gw.example.com"
	m, err := holontls.New(holontls.Config{
		Domains: []string{domain}, CA: ca.URL, Email: "ops@example.com", Storage: storage,
		TrustedRoots: ca.ServerRoots, HTTPPort: port(g.httpLn), TLSPort: port(g.httpsLn),
		DisableTLSALPNChallenge: true, RenewCheckInterval: time.Second,
		Logger: slog.New(slog.NewTextHandler(g.logs, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	g.serve(t, m)
	c := client(ca.Roots(), g.httpsLn.Addr().String())
	first := waitServed(t, c, domain, 20*time.Second, func(*x509.Certificate) bool { return true })
	if len(first.DNSNames) != 1 || first.DNSNames[0] != domain {
		t.Errorf("certificate for %v, want [%s]", first.DNSNames, domain)
	}
	if !strings.Contains(g.logs.String(), "http-01") {
		t.Errorf("the logs do not show an http-01 challenge:\n%s", g.logs.String())
	}

	// The certificate and its key are in the storage directory.
	var found []string
	filepath.WalkDir(storage, func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(path, domain+".crt") {
			found = append(found, path)
		}
		return nil
	})
	if len(found) != 1 {
		t.Fatalf("certificate files in %s: %v, want one %s.crt", storage, found, domain)
	}
	pemBytes, _ := os.ReadFile(found[0])
	if b, _ := pem.Decode(pemBytes); b == nil || !bytes.Contains(pemBytes, []byte("CERTIFICATE")) {
		t.Errorf("%s is not a PEM certificate", found[0])
	}

	// Plain HTTP is redirected to HTTPS, path and query kept.
	hc := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := hc.Get("http://" + g.httpLn.Addr().String() + "/v0/agents?q=1")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	want := "https://" + domain + ":" + strconv.Itoa(port(g.httpsLn)) + "/v0/agents?q=1"
	if resp.StatusCode != http.StatusPermanentRedirect || resp.Header.Get("Location") != want {
		t.Errorf("http: %d Location %q, want 308 %q", resp.StatusCode, resp.Header.Get("Location"), want)
	}

	// Renewal: a 12-second certificate is renewed in the background, and
	// the new one is served before the first expires.
	renewed := waitServed(t, c, domain, 20*time.Second, func(c *x509.Certificate) bool {
		return c.SerialNumber.Cmp(first.SerialNumber) != 0
	})
	if !renewed.NotAfter.After(first.NotAfter) {
		t.Errorf("renewed certificate expires %s, the first %s", renewed.NotAfter, first.NotAfter)
	}
}

// Ensure that a Manager obtains a certificate by TLS-ALPN-01 alone,
// answered by the gateway's own HTTPS listener (no HTTP listener at all),
// and that a second Manager on the same storage serves it without asking
// the CA again.
func TestManager_TLSALPN01_ObtainAndReuseStorage(t *testing.T) {
	g := &gateway{httpsLn: listen(t), logs: &syncBuffer{}}
	closedHTTP := pebbletest.FreePort(t)
	ca := pebbletest.Start(t, pebbletest.Options{HTTPPort: closedHTTP, TLSPort: port(g.httpsLn), Log: g.logs})
	storage := t.TempDir()
	const domain = "alpn.example.com"
	cfg := holontls.Config{
		Domains: []string{domain}, CA: ca.URL, Storage: storage, TrustedRoots: ca.ServerRoots,
		HTTPPort: closedHTTP, TLSPort: port(g.httpsLn), DisableHTTPChallenge: true,
		Logger: slog.New(slog.NewTextHandler(g.logs, nil)),
	}
	m, err := holontls.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	g.serve(t, m)
	c := client(ca.Roots(), g.httpsLn.Addr().String())
	first := waitServed(t, c, domain, 20*time.Second, func(*x509.Certificate) bool { return true })
	if !strings.Contains(g.logs.String(), "tls-alpn-01") {
		t.Errorf("the logs do not show a tls-alpn-01 challenge:\n%s", g.logs.String())
	}
	m.Stop()

	// A restart: same storage, and the CA gone (its URL now refuses).
	ca.Close()
	g2 := &gateway{httpsLn: listen(t), logs: &syncBuffer{}}
	cfg.TLSPort = port(g2.httpsLn)
	cfg.Logger = slog.New(slog.NewTextHandler(g2.logs, nil))
	m2, err := holontls.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	g2.serve(t, m2)
	again := waitServed(t, client(ca.Roots(), g2.httpsLn.Addr().String()), domain, 10*time.Second, func(*x509.Certificate) bool { return true })
	if again.SerialNumber.Cmp(first.SerialNumber) != 0 {
		t.Errorf("after a restart the gateway serves serial %s, want the stored %s", again.SerialNumber, first.SerialNumber)
	}
}

// Ensure that CheckDomain refuses names no CA validates by HTTP-01 or
// TLS-ALPN-01, and accepts ordinary host names.
func TestCheckDomain(t *testing.T) {
	for _, tc := range []struct {
		name string
		ok   bool
	}{
		{"gw.example.com", true},
		{"holon.example.co.uk", true},
		{"", false},
		{"*.example.com", false},
		{"https://gw.example.com", false},
		{"gw.example.com:443", false},
		{"GW.example.com", false},
		{"localhost", false},
		{"127.0.0.1", false},
		{"gw", false},
		{"gw example.com", false},
	} {
		if err := holontls.CheckDomain(tc.name); (err == nil) != tc.ok {
			t.Errorf("CheckDomain(%q) = %v, want ok %v", tc.name, err, tc.ok)
		}
	}
	if _, err := holontls.New(holontls.Config{Domains: []string{"gw.example.com", "gw.example.com"}, Storage: t.TempDir()}); err == nil {
		t.Error("New accepted a domain given twice")
	}
	if _, err := holontls.New(holontls.Config{Domains: []string{"gw.example.com"}}); err == nil {
		t.Error("New accepted no storage directory")
	}
}

// Ensure that RedirectHandler keeps the path and query, drops the port
// for 443, keeps another, and never redirects to a host it does not serve.
func TestRedirectHandler(t *testing.T) {
	for _, tc := range []struct {
		httpsAddr, host, target string
		domains                 []string
		want                    string
	}{
		{":443", "gw.example.com", "/a/b?c=d", []string{"gw.example.com"}, "https://gw.example.com/a/b?c=d"},
		{":8443", "gw.example.com:8080", "/", []string{"gw.example.com"}, "https://gw.example.com:8443/"},
		{":443", "evil.example.net", "/x", []string{"gw.example.com", "b.example.com"}, "https://gw.example.com/x"},
		{":443", "B.Example.com.", "/x", []string{"gw.example.com", "b.example.com"}, "https://b.example.com/x"},
		{":443", "any.example.org", "/x", nil, "https://any.example.org/x"},
	} {
		req, _ := http.NewRequest("POST", "http://"+tc.host+tc.target, nil)
		req.Host = tc.host
		rec := httptest.NewRecorder()
		holontls.RedirectHandler(tc.httpsAddr, tc.domains).ServeHTTP(rec, req)
		if rec.Code != http.StatusPermanentRedirect || rec.Header().Get("Location") != tc.want {
			t.Errorf("%s%s: %d %q, want 308 %q", tc.host, tc.target, rec.Code, rec.Header().Get("Location"), tc.want)
		}
	}
}

// Ensure that a KeyPair serves the operator's certificate, and a renewed
// one as soon as the files change, keeping the last good pair when the
// new files are broken.
func TestKeyPair_Reload(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	roots := x509.NewCertPool()
	writePair := func(serial int64) {
		t.Helper()
		key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		tmpl := &x509.Certificate{
			SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: "own.example.com"},
			DNSNames: []string{"own.example.com"}, NotBefore: time.Now().Add(-time.Minute), NotAfter: time.Now().Add(time.Hour),
			IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
			ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
		if err != nil {
			t.Fatal(err)
		}
		c, _ := x509.ParseCertificate(der)
		roots.AddCert(c)
		kder, _ := x509.MarshalECPrivateKey(key)
		os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600)
		os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), 0o600)
	}
	writePair(1)
	kp, err := holontls.LoadKeyPair(certFile, keyFile)
	if err != nil {
		t.Fatal(err)
	}
	var reloadErrs []error
	var mu sync.Mutex
	kp.OnReloadError = func(err error) { mu.Lock(); reloadErrs = append(reloadErrs, err); mu.Unlock() }
	ln := listen(t)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}), TLSConfig: kp.TLSConfig()}
	go srv.ServeTLS(ln, "", "")
	t.Cleanup(func() { srv.Close() })
	c := client(roots, ln.Addr().String())
	serial := func() int64 {
		t.Helper()
		resp, err := c.Get("https://own.example.com/")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.TLS.PeerCertificates[0].SerialNumber.Int64()
	}
	if s := serial(); s != 1 {
		t.Fatalf("serial %d, want 1", s)
	}
	time.Sleep(10 * time.Millisecond) // a new modification time
	writePair(2)
	if s := serial(); s != 2 {
		t.Errorf("after renewal: serial %d, want 2", s)
	}
	os.WriteFile(keyFile, []byte("not a key"), 0o600)
	if s := serial(); s != 2 {
		t.Errorf("after a broken key: serial %d, want the last good 2", s)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(reloadErrs) != 1 {
		t.Errorf("reload errors: %v, want one", reloadErrs)
	}
	if _, err := holontls.LoadKeyPair(certFile, filepath.Join(dir, "missing.pem")); err == nil {
		t.Error("LoadKeyPair accepted a missing key file")
	}
}
