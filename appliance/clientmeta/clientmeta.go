// Package clientmeta fetches OAuth Client ID Metadata Documents: a client
// whose client_id is an https URL publishes its metadata (its name and
// redirect URIs) at that URL, and the authorization server reads it there
// instead of asking the client to register.
//
// The document is fetched through the guarded network client of remote
// agents (gateway/remote's NetGuard: no private, loopback or link-local
// address, checked on the address actually dialled), over https only,
// without following redirects, within a size and a time limit; the HTTP
// caching it is served with (Cache-Control max-age, no-store, no-cache,
// Expires, ETag) is honoured. A document is accepted only when its
// client_id is exactly the URL it was fetched from, it lists at least one
// redirect URI, and it asks for no client secret (a document is public, so
// the client it describes is a public one).
//
// Imports of the project: gateway/remote only.
package clientmeta

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"holon.dev/holon/gateway/remote"
)

// Limits of a fetch.
const (
	// MaxBytes is the largest document read (the metadata of one client
	// is a few hundred bytes; the draft suggests 5 KB).
	MaxBytes = 5 << 10
	// Timeout bounds one fetch, connect to last byte.
	Timeout = 5 * time.Second
	// MaxAge caps how long a document is kept, whatever its headers say,
	// so that a client's changed redirect URIs are seen within a day.
	MaxAge = 24 * time.Hour
	// maxEntries bounds the cache; beyond it the entry that expires first
	// goes.
	maxEntries = 1000
	// maxURL is the longest client_id URL taken.
	maxURL = 2000
)

// Document is a client's metadata document (RFC 7591 §2 fields): what
// this server reads of it.
type Document struct {
	ClientID                string   `json:"client_id"`
	ClientName              string   `json:"client_name"`
	ClientURI               string   `json:"client_uri,omitempty"`
	RedirectURIs            []string `json:"redirect_uris"`
	GrantTypes              []string `json:"grant_types,omitempty"`
	ResponseTypes           []string `json:"response_types,omitempty"`
	TokenEndpointAuthMethod string   `json:"token_endpoint_auth_method,omitempty"`
	Scope                   string   `json:"scope,omitempty"`
	// ClientSecret is read only to refuse a document that carries one.
	ClientSecret string `json:"client_secret,omitempty"`
}

// Error is a document refused, or one that could not be fetched: Why says
// what is wrong, for the human on the consent page and the client's
// developer.
type Error struct {
	// ClientID is the URL the document was fetched from.
	ClientID string
	// Why says what is wrong and what to fix.
	Why string
	// Err is the underlying failure, if any.
	Err error
}

// Error names the client_id and what is wrong with its document.
func (e *Error) Error() string {
	return fmt.Sprintf("client metadata document %s: %s", e.ClientID, e.Why)
}

// Unwrap gives the underlying failure.
func (e *Error) Unwrap() error { return e.Err }

// IsURL reports whether a client_id names a metadata document: an https
// URL. Any other client_id is a registered one.
func IsURL(clientID string) bool {
	return strings.HasPrefix(clientID, "https://")
}

// CheckURL refuses a client_id URL the draft does not allow: https, a
// host, a path, no fragment, no credentials, no dot segments.
func CheckURL(clientID string) error {
	bad := func(why string) error { return &Error{ClientID: clientID, Why: why} }
	if len(clientID) > maxURL {
		return bad(fmt.Sprintf("the URL is longer than %d characters", maxURL))
	}
	u, err := url.Parse(clientID)
	switch {
	case err != nil:
		return bad("not a URL")
	case u.Scheme != "https":
		return bad("a client_id URL must be https")
	case u.Host == "" || u.Hostname() == "":
		return bad("the URL has no host")
	case u.User != nil:
		return bad("the URL carries credentials")
	case u.Fragment != "" || strings.Contains(clientID, "#"):
		return bad("the URL has a fragment")
	case u.Path == "" || u.Path == "/":
		return bad("the URL has no path: the document lives at a path such as /oauth/client.json")
	}
	for _, seg := range strings.Split(u.Path, "/") {
		if seg == "." || seg == ".." {
			return bad("the URL's path has a . or .. segment")
		}
	}
	return nil
}

// Fetcher fetches and caches metadata documents. Its zero value is not
// usable: make one with New.
type Fetcher struct {
	client  *http.Client
	now     func() time.Time
	timeout time.Duration

	mu    sync.Mutex
	cache map[string]*entry
}

// entry is a cached document with its freshness and validator.
type entry struct {
	doc     *Document
	expires time.Time
	etag    string
}

// Options are a Fetcher's settings; the zero value is the production one.
type Options struct {
	// RootCAs are the certificate authorities trusted (the system's when
	// nil): tests serve documents with a test CA.
	RootCAs *x509.CertPool
	// Now is the clock (time.Now when nil).
	Now func() time.Time
	// Timeout bounds one fetch (Timeout when zero).
	Timeout time.Duration
}

// New makes a Fetcher that dials through guard.
func New(guard *remote.NetGuard, opts Options) *Fetcher {
	now := opts.Now
	if now == nil {
		now = time.Now
	}
	timeout := opts.Timeout
	if timeout <= 0 {
		timeout = Timeout
	}
	t := &http.Transport{
		// Never through a proxy: the guard must see the address dialled.
		Proxy:                  nil,
		DialContext:            guard.DialContext,
		TLSClientConfig:        &tls.Config{RootCAs: opts.RootCAs, MinVersion: tls.VersionTLS12},
		TLSHandshakeTimeout:    timeout,
		ResponseHeaderTimeout:  timeout,
		MaxResponseHeaderBytes: 16 << 10,
		MaxIdleConns:           10,
		IdleConnTimeout:        30 * time.Second,
		ForceAttemptHTTP2:      true,
	}
	return &Fetcher{
		client: &http.Client{
			Transport: t,
			Timeout:   timeout,
			CheckRedirect: func(*http.Request, []*http.Request) error {
				return http.ErrUseLastResponse
			},
		},
		now:     now,
		timeout: timeout,
		cache:   map[string]*entry{},
	}
}

// Fetch returns the document a client_id URL names, from the cache while
// it is fresh, else fetched (revalidated when the cached copy has an
// ETag).
func (f *Fetcher) Fetch(ctx context.Context, clientID string) (*Document, error) {
	if err := CheckURL(clientID); err != nil {
		return nil, err
	}
	now := f.now()
	f.mu.Lock()
	e := f.cache[clientID]
	f.mu.Unlock()
	if e != nil && now.Before(e.expires) {
		return e.doc, nil
	}
	doc, fresh, err := f.fetch(ctx, clientID, e)
	if err != nil {
		return nil, err
	}
	f.store(clientID, fresh)
	return doc, nil
}

// fetch gets the document; old is the stale cached copy, if any, offered
// for revalidation. It returns the entry to cache (nil: none).
func (f *Fetcher) fetch(ctx context.Context, clientID string, old *entry) (*Document, *entry, error) {
	fail := func(why string, err error) (*Document, *entry, error) {
		return nil, nil, &Error{ClientID: clientID, Why: why, Err: err}
	}
	ctx, cancel := context.WithTimeout(ctx, f.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, clientID, nil)
	if err != nil {
		return fail("not a URL", err)
	}
	req.Header.Set("Accept", "application/json")
	if old != nil && old.etag != "" {
		req.Header.Set("If-None-Match", old.etag)
	}
	resp, err := f.client.Do(req)
	if err != nil {
		var blocked *remote.BlockedAddressError
		if errors.As(err, &blocked) {
			return fail(fmt.Sprintf("its host is not on the public internet (%s, %s): a client metadata document must be served from a public https address", blocked.Addr, blocked.Why), err)
		}
		// The deadline, the client's timeout or the transport's header
		// timeout, whichever fires first on a busy machine: all the same.
		var ne net.Error
		if ctx.Err() != nil || (errors.As(err, &ne) && ne.Timeout()) {
			return fail(fmt.Sprintf("no answer within %s", f.timeout), err)
		}
		return fail(fmt.Sprintf("could not be fetched: %v", err), err)
	}
	defer resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusNotModified && old != nil:
		return old.doc, f.entry(old.doc, resp, old.etag), nil
	case resp.StatusCode >= 300 && resp.StatusCode < 400:
		return fail(fmt.Sprintf("its URL answered %d (a redirect to %q): the document must be served at the client_id URL itself", resp.StatusCode, resp.Header.Get("Location")), nil)
	case resp.StatusCode != http.StatusOK:
		return fail(fmt.Sprintf("its URL answered %d", resp.StatusCode), nil)
	}
	if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt != "application/json" && !strings.HasSuffix(mt, "+json") {
		return fail(fmt.Sprintf("served as %q: a metadata document is application/json", resp.Header.Get("Content-Type")), nil)
	}
	if resp.ContentLength > MaxBytes {
		return fail(fmt.Sprintf("it is %d bytes, more than the %d bytes a document may have", resp.ContentLength, MaxBytes), nil)
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, MaxBytes+1))
	if err != nil {
		return fail(fmt.Sprintf("reading it failed: %v", err), err)
	}
	if len(b) > MaxBytes {
		return fail(fmt.Sprintf("it is more than the %d bytes a document may have", MaxBytes), nil)
	}
	var doc Document
	if err := json.Unmarshal(b, &doc); err != nil {
		return fail(fmt.Sprintf("not a JSON object of client metadata: %v", err), err)
	}
	if err := check(clientID, &doc); err != nil {
		return nil, nil, err
	}
	return &doc, f.entry(&doc, resp, resp.Header.Get("ETag")), nil
}

// check refuses a document that does not describe the client at its URL.
func check(clientID string, doc *Document) error {
	bad := func(why string) error { return &Error{ClientID: clientID, Why: why} }
	switch {
	case doc.ClientID != clientID:
		return bad(fmt.Sprintf("its client_id is %q, not the URL it was fetched from: a document names itself exactly", doc.ClientID))
	case len(doc.RedirectURIs) == 0:
		return bad("it lists no redirect_uris")
	case doc.ClientSecret != "":
		return bad("it carries a client_secret: a document is public, so it describes a public client, with none")
	}
	switch doc.TokenEndpointAuthMethod {
	case "", "none":
	default:
		return bad(fmt.Sprintf("token_endpoint_auth_method is %q: a client described by a public document authenticates with none (PKCE)", doc.TokenEndpointAuthMethod))
	}
	return nil
}

// entry is what to cache of an answer, by its caching headers: fresh for
// its max-age (or until Expires); with no freshness (or no-cache) but an
// ETag, kept stale, to be revalidated on next use; nil when it may not be
// kept (no-store, or neither freshness nor ETag).
func (f *Fetcher) entry(doc *Document, resp *http.Response, etag string) *entry {
	now := f.now()
	cc := resp.Header.Get("Cache-Control")
	var age time.Duration
	fresh, noCache := false, false
	for _, d := range strings.Split(cc, ",") {
		name, val, _ := strings.Cut(strings.TrimSpace(strings.ToLower(d)), "=")
		switch name {
		case "no-store":
			return nil
		case "no-cache":
			noCache = true
		case "max-age":
			var s int64
			if _, err := fmt.Sscan(strings.Trim(val, `"`), &s); err == nil && s > 0 {
				age, fresh = time.Duration(s)*time.Second, true
			}
		}
	}
	if !fresh {
		if exp, err := http.ParseTime(resp.Header.Get("Expires")); err == nil {
			date, err := http.ParseTime(resp.Header.Get("Date"))
			if err != nil {
				date = now
			}
			if d := exp.Sub(date); d > 0 {
				age, fresh = d, true
			}
		}
	}
	if !fresh || noCache {
		if etag == "" {
			return nil
		}
		return &entry{doc: doc, expires: now, etag: etag}
	}
	if age > MaxAge {
		age = MaxAge
	}
	return &entry{doc: doc, expires: now.Add(age), etag: etag}
}

// store keeps e for clientID (or forgets clientID when e is nil), evicting
// the entry that expires first when the cache is full.
func (f *Fetcher) store(clientID string, e *entry) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if e == nil {
		delete(f.cache, clientID)
		return
	}
	if _, ok := f.cache[clientID]; !ok && len(f.cache) >= maxEntries {
		var first string
		for id, c := range f.cache {
			if first == "" || c.expires.Before(f.cache[first].expires) {
				first = id
			}
		}
		delete(f.cache, first)
	}
	f.cache[clientID] = e
}
