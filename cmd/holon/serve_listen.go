package main

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"holon.dev/holon/appliance"
	"holon.dev/holon/appliance/ops"
	holontls "holon.dev/holon/tls"
)

// servers are holon serve's listeners: the API (HTTP or HTTPS), the plain
// HTTP one that answers ACME HTTP-01 challenges and redirects to HTTPS,
// and the metrics one.
type servers struct {
	api, http, metrics       *http.Server
	apiLn, httpLn, metricsLn net.Listener
	tls                      string // "", "acme" or "own"
	domains                  []string
	acme                     *holontls.Manager
	errc                     chan error
}

type namedListener struct {
	name string
	ln   net.Listener
}

// listen opens every listener and builds its server; nothing is served
// until start.
func (c *serveCommand) listen(f *serveFlags, app *appliance.App, log *slog.Logger) (_ *servers, err error) {
	s := &servers{errc: make(chan error, 3), domains: f.domains}
	defer func() {
		if err != nil {
			s.close()
		}
	}()
	open := func(addr, what string) (net.Listener, error) {
		listen := c.listenOn
		if listen == nil {
			listen = func(addr string) (net.Listener, error) { return net.Listen("tcp", addr) }
		}
		ln, err := listen(addr)
		if err != nil {
			return nil, fmt.Errorf("%s listener: %w", what, err)
		}
		return ln, nil
	}
	if s.apiLn, err = open(f.addr, "--addr"); err != nil {
		return nil, err
	}
	if f.httpAddr != "" {
		if s.httpLn, err = open(f.httpAddr, "--http-addr"); err != nil {
			return nil, err
		}
	}
	if f.metricsAddr != "" {
		if s.metricsLn, err = open(f.metricsAddr, "--metrics-addr"); err != nil {
			return nil, err
		}
	}
	// TLS handshake errors from scanners would flood the logs.
	errorLog := slog.NewLogLogger(log.Handler(), slog.LevelDebug)
	s.api = &http.Server{Handler: boundBodies(app.Handler(), f.bodyTimeout), ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute, ErrorLog: errorLog}
	var redirect http.Handler
	switch {
	case len(f.domains) > 0:
		s.tls = "acme"
		var roots *x509.CertPool
		if f.acmeRoot != "" {
			pemBytes, err := os.ReadFile(f.acmeRoot)
			if err != nil {
				return nil, fmt.Errorf("--acme-ca-root: %w", err)
			}
			roots = x509.NewCertPool()
			if !roots.AppendCertsFromPEM(pemBytes) {
				return nil, fmt.Errorf("--acme-ca-root: %s holds no PEM certificate", f.acmeRoot)
			}
		}
		s.acme, err = holontls.New(holontls.Config{
			Domains:      f.domains,
			CA:           f.acmeCA,
			Email:        f.acmeEmail,
			Storage:      filepath.Join(filepath.Dir(f.db), "certs"),
			TrustedRoots: roots,
			HTTPPort:     port(s.httpLn),
			TLSPort:      port(s.apiLn),
			Logger:       log,
		})
		if err != nil {
			return nil, err
		}
		s.api.TLSConfig = s.acme.TLSConfig()
		redirect = s.acme.HTTPHandler(holontls.RedirectHandler(s.apiLn.Addr().String(), f.domains))
	case f.tlsCert != "":
		s.tls = "own"
		kp, err := holontls.LoadKeyPair(f.tlsCert, f.tlsKey)
		if err != nil {
			return nil, err
		}
		kp.OnReloadError = func(err error) {
			log.Error("--tls-cert/--tls-key changed but do not load; serving the previous certificate", "err", err)
		}
		s.api.TLSConfig = kp.TLSConfig()
		redirect = holontls.RedirectHandler(s.apiLn.Addr().String(), nil)
	}
	if s.httpLn != nil {
		s.http = &http.Server{Handler: redirect, ReadHeaderTimeout: 10 * time.Second, ErrorLog: errorLog}
	}
	if s.metricsLn != nil {
		mux := http.NewServeMux()
		mux.Handle("GET "+ops.MetricsPath, app.MetricsHandler())
		s.metrics = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, ErrorLog: errorLog}
	}
	return s, nil
}

// port is a listener's TCP port (0 for none).
func port(ln net.Listener) int {
	if ln == nil {
		return 0
	}
	if a, ok := ln.Addr().(*net.TCPAddr); ok {
		return a.Port
	}
	return 0
}

func (s *servers) listeners() []namedListener {
	var out []namedListener
	for _, l := range []namedListener{{"api", s.apiLn}, {"http", s.httpLn}, {"metrics", s.metricsLn}} {
		if l.ln != nil {
			out = append(out, l)
		}
	}
	return out
}

func (s *servers) apiAddr() string { return s.apiLn.Addr().String() }

// start serves every listener; a listener that fails reports on errc.
func (s *servers) start() {
	serve := func(srv *http.Server, ln net.Listener, tls bool) {
		var err error
		if tls {
			err = srv.ServeTLS(ln, "", "")
		} else {
			err = srv.Serve(ln)
		}
		if err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.errc <- err
		}
	}
	go serve(s.api, s.apiLn, s.tls != "")
	if s.http != nil {
		go serve(s.http, s.httpLn, false)
	}
	if s.metrics != nil {
		go serve(s.metrics, s.metricsLn, false)
	}
}

// drain stops accepting requests at once and waits up to bound for those
// running (calls among them) to finish; it reports whether they all did.
// The metrics listener stays up while the API drains.
func (s *servers) drain(bound time.Duration) bool {
	ctx, cancel := context.WithTimeout(context.Background(), bound)
	defer cancel()
	if s.http != nil {
		go s.http.Shutdown(ctx)
	}
	drained := s.api.Shutdown(ctx) == nil
	if !drained {
		s.api.Close()
	}
	if s.metrics != nil {
		mctx, mcancel := context.WithTimeout(context.Background(), time.Second)
		defer mcancel()
		s.metrics.Shutdown(mctx)
	}
	return drained
}

// close releases everything, served or not.
func (s *servers) close() {
	if s.acme != nil {
		s.acme.Stop()
	}
	for _, srv := range []*http.Server{s.api, s.http, s.metrics} {
		if srv != nil {
			srv.Close()
		}
	}
	for _, l := range s.listeners() {
		l.ln.Close()
	}
}

// logAttrs are the listeners' addresses for the start-up line, then more.
func (s *servers) logAttrs(more ...any) []any {
	attrs := []any{"addr", s.apiAddr()}
	if s.tls != "" {
		attrs = append(attrs, "tls", s.tls)
	}
	if len(s.domains) > 0 {
		attrs = append(attrs, "domains", strings.Join(s.domains, ","))
	}
	if s.httpLn != nil {
		attrs = append(attrs, "http_addr", s.httpLn.Addr().String())
	}
	if s.metricsLn != nil {
		attrs = append(attrs, "metrics_addr", s.metricsLn.Addr().String())
	}
	return append(attrs, more...)
}
