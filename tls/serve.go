package tls

import (
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"time"
)

// RedirectHandler sends every request to the same path on HTTPS, with a
// 308 (the method and body are kept). httpsAddr is the HTTPS listener's
// address: its port is kept in the URL unless it is 443. With domains,
// a request for any other host is sent to the first domain, so the
// redirect never points at a name the gateway has no certificate for.
func RedirectHandler(httpsAddr string, domains []string) http.Handler {
	port := ""
	if _, p, err := net.SplitHostPort(httpsAddr); err == nil && p != "443" && p != "https" {
		port = p
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		host := r.Host
		if h, _, err := net.SplitHostPort(host); err == nil {
			host = h
		}
		host = strings.TrimSuffix(strings.ToLower(host), ".")
		if len(domains) > 0 && !slices.Contains(domains, host) {
			host = domains[0]
		}
		if host == "" {
			http.Error(w, "this gateway only answers over HTTPS, and the request names no host", http.StatusBadRequest)
			return
		}
		if port != "" {
			host = net.JoinHostPort(host, port)
		} else if strings.Contains(host, ":") {
			host = "[" + host + "]" // an IPv6 literal
		}
		w.Header().Set("Connection", "close")
		http.Redirect(w, r, "https://"+host+r.URL.RequestURI(), http.StatusPermanentRedirect)
	})
}

// KeyPair serves a certificate the operator manages (holon serve
// --tls-cert/--tls-key). The files are read again when either one
// changes, so a renewal by another tool (certbot, a private CA's agent)
// is served without a restart; a pair that fails to load is reported and
// the last good one kept.
type KeyPair struct {
	certFile, keyFile string

	mu    sync.Mutex
	cert  *tls.Certificate
	stamp string
	// OnReloadError is told when changed files fail to load.
	OnReloadError func(error)
}

// LoadKeyPair reads a PEM certificate (with its chain) and its key.
func LoadKeyPair(certFile, keyFile string) (*KeyPair, error) {
	k := &KeyPair{certFile: certFile, keyFile: keyFile}
	stamp, err := k.fileStamp()
	if err != nil {
		return nil, err
	}
	if err := k.load(stamp); err != nil {
		return nil, err
	}
	return k, nil
}

// fileStamp identifies the files' current versions.
func (k *KeyPair) fileStamp() (string, error) {
	var b strings.Builder
	for _, f := range []string{k.certFile, k.keyFile} {
		fi, err := os.Stat(f)
		if err != nil {
			return "", fmt.Errorf("tls: %w", err)
		}
		fmt.Fprintf(&b, "%d.%d;", fi.ModTime().UnixNano(), fi.Size())
	}
	return b.String(), nil
}

func (k *KeyPair) load(stamp string) error {
	c, err := tls.LoadX509KeyPair(k.certFile, k.keyFile)
	if err != nil {
		return fmt.Errorf("tls: load %s and %s: %w", k.certFile, k.keyFile, err)
	}
	if c.Leaf != nil && time.Now().After(c.Leaf.NotAfter) {
		return fmt.Errorf("tls: %s expired at %s", k.certFile, c.Leaf.NotAfter.UTC().Format(time.RFC3339))
	}
	k.cert, k.stamp = &c, stamp
	return nil
}

// GetCertificate is the tls.Config hook: the current pair, read again if
// its files changed.
func (k *KeyPair) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if stamp, err := k.fileStamp(); err == nil && stamp != k.stamp {
		if err := k.load(stamp); err != nil {
			k.stamp = stamp // report a bad pair once, not at every handshake
			if k.OnReloadError != nil {
				k.OnReloadError(err)
			}
		}
	}
	return k.cert, nil
}

// TLSConfig is the HTTPS listener's configuration for this pair.
func (k *KeyPair) TLSConfig() *tls.Config {
	return &tls.Config{GetCertificate: k.GetCertificate, NextProtos: []string{"h2", "http/1.1"}, MinVersion: tls.VersionTLS12}
}
