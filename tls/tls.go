// Package tls gives the gateway its own certificates. A Manager obtains them
// by ACME (HTTP-01 and TLS-ALPN-01 challenges) with certmagic, keeps them in
// the appliance's data directory, renews them in the background and serves
// them; a KeyPair serves a certificate the operator manages.
//
// It is the one package that imports certmagic (and, for its logger type,
// zap). Import it under an alias: its name shadows crypto/tls.
package tls

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/caddyserver/certmagic"
)

// DefaultCA is the ACME directory used when Config.CA is empty: Let's
// Encrypt's production one.
const DefaultCA = certmagic.LetsEncryptProductionCA

// acmeTLS1 is the ALPN protocol of the TLS-ALPN-01 challenge (RFC 8737).
const acmeTLS1 = "acme-tls/1"

// Config says which certificates to manage and how.
type Config struct {
	// Domains are the names to obtain certificates for (one certificate
	// each). The first one is the gateway's public name.
	Domains []string
	// CA is the ACME directory URL (DefaultCA when empty).
	CA string
	// Email is the ACME account's contact, for the CA's expiry and
	// incident notices (optional).
	Email string
	// Storage is the directory where certificates, their keys and the ACME
	// account are kept (the appliance's data directory, <dir of db>/certs).
	Storage string
	// TrustedRoots are the roots trusted for the CA's own HTTPS, for a
	// private CA; the system's roots when nil.
	TrustedRoots *x509.CertPool
	// HTTPPort and TLSPort are the ports of the gateway's HTTP and HTTPS
	// listeners, where the challenges are answered (80 and 443 when 0).
	// The CA validates on 80 and 443: other ports only make sense behind a
	// port forward, or with a test CA.
	HTTPPort, TLSPort int
	// DisableHTTPChallenge and DisableTLSALPNChallenge turn off one of the
	// two challenges (both are on by default; the CA picks).
	DisableHTTPChallenge, DisableTLSALPNChallenge bool
	// RenewalWindowRatio is the part of a certificate's lifetime, at its
	// end, in which it is renewed (certmagic's default, 1/3, when 0); the
	// CA's renewal information (ARI) can bring that earlier.
	RenewalWindowRatio float64
	// RenewCheckInterval is how often the certificates are checked for
	// renewal (certmagic's default, 10 minutes, when 0).
	RenewCheckInterval time.Duration
	// Logger receives certmagic's messages (ACME orders, renewals,
	// failures); discarded when nil.
	Logger *slog.Logger
}

// Manager obtains, renews and serves the certificates of Config.Domains.
// Build it at setup, Manage at start, Stop at shutdown.
type Manager struct {
	domains []string
	cache   *certmagic.Cache
	magic   *certmagic.Config
	issuer  *certmagic.ACMEIssuer
	cancel  context.CancelFunc
	stop    sync.Once
}

// CheckDomain refuses a name no CA can issue an HTTP-01 or TLS-ALPN-01
// certificate for: empty, with a scheme, port or path, a wildcard, an IP
// address or a loopback name.
func CheckDomain(name string) error {
	switch {
	case name == "":
		return errors.New("empty domain")
	case strings.Contains(name, "*"):
		return fmt.Errorf("%q: wildcard certificates need the DNS challenge; name each host", name)
	case strings.ContainsAny(name, ":/"):
		return fmt.Errorf("%q: give the host name alone, such as gw.example.com", name)
	case name != strings.ToLower(name):
		return fmt.Errorf("%q: write the name in lowercase", name)
	case !certmagic.SubjectQualifiesForCert(name) || certmagic.SubjectIsIP(name) || !strings.Contains(name, "."):
		return fmt.Errorf("%q is not a host name such as gw.example.com", name)
	case name == "localhost" || strings.HasSuffix(name, ".localhost"):
		return fmt.Errorf("%q is a loopback name: no CA validates it", name)
	}
	return nil
}

// New builds the certificate cache and the ACME issuer; nothing is
// obtained until Manage.
func New(cfg Config) (*Manager, error) {
	if len(cfg.Domains) == 0 {
		return nil, errors.New("tls: no domain to manage")
	}
	seen := map[string]bool{}
	for _, d := range cfg.Domains {
		if err := CheckDomain(d); err != nil {
			return nil, fmt.Errorf("tls: %w", err)
		}
		if seen[d] {
			return nil, fmt.Errorf("tls: %s is given twice", d)
		}
		seen[d] = true
	}
	if cfg.Storage == "" {
		return nil, errors.New("tls: no storage directory for the certificates")
	}
	if cfg.CA == "" {
		cfg.CA = DefaultCA
	}
	logger := zapLogger(cfg.Logger)
	m := &Manager{domains: append([]string(nil), cfg.Domains...)}
	m.cache = certmagic.NewCache(certmagic.CacheOptions{
		GetConfigForCert:   func(certmagic.Certificate) (*certmagic.Config, error) { return m.magic, nil },
		RenewCheckInterval: cfg.RenewCheckInterval,
		Logger:             logger,
	})
	m.magic = certmagic.New(m.cache, certmagic.Config{
		Storage:            &certmagic.FileStorage{Path: cfg.Storage},
		RenewalWindowRatio: cfg.RenewalWindowRatio,
		Logger:             logger,
	})
	m.issuer = certmagic.NewACMEIssuer(m.magic, certmagic.ACMEIssuer{
		CA:                      cfg.CA,
		Email:                   cfg.Email,
		Agreed:                  true,
		DisableHTTPChallenge:    cfg.DisableHTTPChallenge,
		DisableTLSALPNChallenge: cfg.DisableTLSALPNChallenge,
		// certmagic answers challenges on its own listeners only when it
		// can bind these ports; the gateway holds them, so its listeners
		// answer (HTTPHandler, TLSConfig).
		AltHTTPPort:    cfg.HTTPPort,
		AltTLSALPNPort: cfg.TLSPort,
		TrustedRoots:   cfg.TrustedRoots,
		Logger:         logger,
	})
	m.magic.Issuers = []certmagic.Issuer{m.issuer}
	return m, nil
}

// Domains are the names the manager serves.
func (m *Manager) Domains() []string { return append([]string(nil), m.domains...) }

// Manage loads the certificates kept in storage and obtains or renews the
// others in the background (retrying with backoff when the CA fails),
// then keeps renewing them until Stop. Errors are logged, never fatal:
// a CA outage must not stop a gateway whose certificate is still valid.
// The listeners must be serving HTTPHandler and TLSConfig already, since
// the challenges arrive there.
func (m *Manager) Manage(ctx context.Context) error {
	ctx, m.cancel = context.WithCancel(context.WithoutCancel(ctx))
	return m.magic.ManageAsync(ctx, m.domains)
}

// TLSConfig is the HTTPS listener's configuration: the managed
// certificates, and the answers to TLS-ALPN-01 challenges.
func (m *Manager) TLSConfig() *tls.Config {
	c := m.magic.TLSConfig()
	c.NextProtos = []string{"h2", "http/1.1", acmeTLS1}
	c.MinVersion = tls.VersionTLS12
	return c
}

// HTTPHandler answers ACME HTTP-01 challenges before anything else, and
// hands every other request to next (usually a redirect to HTTPS).
func (m *Manager) HTTPHandler(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if m.issuer.HandleHTTPChallenge(w, r) {
			return
		}
		next.ServeHTTP(w, r)
	})
}

// Stop ends renewals and background ACME work.
func (m *Manager) Stop() {
	m.stop.Do(func() {
		if m.cancel != nil {
			m.cancel()
		}
		m.cache.Stop()
	})
}
