package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"holon.dev/holon/tls/pebbletest"
)

// httpsClient trusts roots only and dials addr whatever the URL's host,
// with a new handshake for every request.
func httpsClient(roots *x509.CertPool, addr string) *http.Client {
	d := &net.Dialer{Timeout: 2 * time.Second}
	return &http.Client{
		Timeout: 5 * time.Second,
		Transport: &http.Transport{
			TLSClientConfig:   &tls.Config{RootCAs: roots},
			DisableKeepAlives: true,
			DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
				return d.DialContext(ctx, network, addr)
			},
		},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// waitHTTPS polls url until it answers 200 over a certificate the client
// trusts, and returns the certificate.
func waitHTTPS(t *testing.T, c *http.Client, url string, within time.Duration) *x509.Certificate {
	t.Helper()
	deadline := time.Now().Add(within)
	var last error
	for time.Now().Before(deadline) {
		resp, err := c.Get(url)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return resp.TLS.PeerCertificates[0]
			}
			last = nil
		} else {
			last = err
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("%s: no answer within %s: %v", url, within, last)
	return nil
}

// Ensure that holon serve --domain, in production and hosted, obtains a
// real certificate from an ACME server (pebble, validating the challenges
// against the gateway's own listeners), serves the API over HTTPS with it,
// redirects HTTP to HTTPS, defaults HOLON_PUBLIC_URL to the domain and
// HOLON_TRUST_PROXY to 0, logs JSON lines, keeps the certificate in certs/
// beside --db, and after a restart serves it again with the CA gone.
func TestServe_Domain_ACMECertificate(t *testing.T) {
	// Both ports are bound here, once, and handed to each serve in turn:
	// a port picked, closed and bound later could be taken meanwhile.
	httpHeld, apiHeld := holdPort(t), holdPort(t)
	httpPort, apiPort := httpHeld.port, apiHeld.port
	held := map[string]*heldPort{httpHeld.addr: httpHeld, apiHeld.addr: apiHeld}
	ca := pebbletest.Start(t, pebbletest.Options{HTTPPort: httpPort, TLSPort: apiPort})
	dir := t.TempDir()
	root := filepath.Join(dir, "acme-root.pem")
	if err := os.WriteFile(root, ca.ServerRootsPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	db := filepath.Join(dir, "state", "holon.db")
	if err := os.MkdirAll(filepath.Dir(db), 0o700); err != nil {
		t.Fatal(err)
	}
	env := productionEnv()
	delete(env, "HOLON_PUBLIC_URL")
	delete(env, "HOLON_TRUST_PROXY")
	const domain = "gw.example.com"
	apiAddr, httpAddr := "127.0.0.1:"+strconv.Itoa(apiPort), "127.0.0.1:"+strconv.Itoa(httpPort)
	args := []string{"--hosted", "--domain", domain, "--acme-ca", ca.URL, "--acme-ca-root", root, "--acme-email", "ops@example.com",
		"--addr", apiAddr, "--http-addr", httpAddr, "--db", db}
	rs := startServeOn(t, held, env, args...)
	c := httpsClient(ca.Roots(), apiAddr)
	cert := waitHTTPS(t, c, "https://"+domain+"/healthz", 20*time.Second)
	if len(cert.DNSNames) != 1 || cert.DNSNames[0] != domain {
		t.Errorf("certificate for %v", cert.DNSNames)
	}
	// The hosted API is behind it: no key, 401.
	if resp, err := c.Get("https://" + domain + "/v0/me"); err != nil || resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("GET /v0/me over HTTPS: %v %v, want 401", resp, err)
	}
	// HTTP redirects to HTTPS.
	req, _ := http.NewRequest("GET", "http://"+httpAddr+"/v0/agents?q=csv", nil)
	req.Host = domain
	resp, err := (&http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if want := "https://" + domain + ":" + strconv.Itoa(apiPort) + "/v0/agents?q=csv"; resp.StatusCode != http.StatusPermanentRedirect || resp.Header.Get("Location") != want {
		t.Errorf("HTTP: %d %q, want 308 %q", resp.StatusCode, resp.Header.Get("Location"), want)
	}
	crts, _ := filepath.Glob(filepath.Join(filepath.Dir(db), "certs", "certificates", "*", domain, domain+".crt"))
	if len(crts) != 1 {
		t.Errorf("certificate files beside the db: %v", crts)
	}
	rs.stop(t)
	var start map[string]any
	for _, line := range strings.Split(strings.TrimSpace(rs.stderr.String()), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("a production log line is not JSON: %s", line)
		}
		if m["msg"] == "holon serving" {
			start = m
		}
	}
	if start["public_url"] != "https://"+domain+":"+strconv.Itoa(apiPort) || start["tls"] != "acme" {
		t.Errorf("start-up line %v: want public_url https://%s:%d and tls acme", start, domain, apiPort)
	}

	// Restart with the CA gone: the stored certificate is served.
	ca.Close()
	rs2 := startServeOn(t, held, env, args...)
	again := waitHTTPS(t, c, "https://"+domain+"/healthz", 10*time.Second)
	if again.SerialNumber.Cmp(cert.SerialNumber) != 0 {
		t.Errorf("after a restart: serial %s, want the stored %s", again.SerialNumber, cert.SerialNumber)
	}
	rs2.stop(t)
}

// Ensure that holon serve refuses contradictory TLS flags and names no CA
// can validate, before opening anything.
func TestServe_TLSFlagsChecked(t *testing.T) {
	db := filepath.Join(t.TempDir(), "holon.db")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--domain", "gw.example.com", "--tls-cert", "c.pem", "--tls-key", "k.pem"}, "not both"},
		{[]string{"--tls-cert", "c.pem"}, "go together"},
		{[]string{"--acme-email", "ops@example.com"}, "need --domain"},
		{[]string{"--http-addr", ":8081"}, "needs --domain or --tls-cert"},
		{[]string{"--domain", "localhost"}, "--domain"},
		{[]string{"--domain", "*.example.com"}, "wildcard"},
		{[]string{"--domain", "gw.example.com", "--domain", "GW.example.com"}, "twice"},
		{[]string{"--tls-cert", "missing.pem", "--tls-key", "missing.pem", "--addr", "127.0.0.1:0"}, "missing.pem"},
	} {
		var stderr lockedBuffer
		m := &Main{Stdout: &lockedBuffer{}, Stderr: &stderr, Getenv: func(string) string { return "" }}
		code := m.Run(context.Background(), append([]string{"serve", "--db", db}, tc.args...))
		if code != 1 || !strings.Contains(stderr.String(), tc.want) {
			t.Errorf("%v: exit %d, %q; want 1 and %q", tc.args, code, stderr.String(), tc.want)
		}
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(db), "certs")); err == nil {
		t.Error("a refused start left a certs directory")
	}
	for in, want := range map[string]string{"9090": "127.0.0.1:9090", ":9090": "127.0.0.1:9090", "0.0.0.0:9090": "0.0.0.0:9090", "[::1]:9090": "[::1]:9090"} {
		if got := loopbackDefault(in); got != want {
			t.Errorf("--metrics-addr %s binds %s, want %s", in, got, want)
		}
	}
}
