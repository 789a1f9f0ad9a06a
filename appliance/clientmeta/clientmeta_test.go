package clientmeta_test

import (
	"context"
	"crypto/x509"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"holon.dev/holon/appliance/clientmeta"
	"holon.dev/holon/gateway/remote"
)

// names resolves the test's host names: example.com to a public address
// (the documents' host), private.example.com to a private one.
type names map[string]netip.Addr

func (n names) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	if a, ok := n[host]; ok {
		return []netip.Addr{a}, nil
	}
	return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
}

// toServer connects every dial the guard allowed to the test server: the
// guard checked the address the name resolved to, the test server stands
// in for the host at it.
type toServer struct{ addr string }

func (d toServer) DialContext(ctx context.Context, network, _ string) (net.Conn, error) {
	var nd net.Dialer
	return nd.DialContext(ctx, network, d.addr)
}

// docServer serves metadata documents over https, at a public name, and
// counts the requests that reached it.
type docServer struct {
	srv   *httptest.Server
	hits  atomic.Int64
	clock *clock

	mu     sync.Mutex
	routes map[string]http.HandlerFunc
}

type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *clock) advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

func newDocServer(t *testing.T) (*docServer, *clientmeta.Fetcher) {
	ds := &docServer{routes: map[string]http.HandlerFunc{}, clock: &clock{now: time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)}}
	ds.srv = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ds.hits.Add(1)
		ds.mu.Lock()
		h := ds.routes[r.URL.Path]
		ds.mu.Unlock()
		if h == nil {
			http.NotFound(w, r)
			return
		}
		h(w, r)
	}))
	t.Cleanup(ds.srv.Close)
	pool := x509.NewCertPool()
	pool.AddCert(ds.srv.Certificate())
	guard := &remote.NetGuard{
		Resolver: names{
			"example.com":         netip.MustParseAddr("93.184.215.14"),
			"private.example.com": netip.MustParseAddr("10.1.2.3"),
		},
		Dialer: toServer{ds.srv.Listener.Addr().String()},
	}
	return ds, clientmeta.New(guard, clientmeta.Options{RootCAs: pool, Now: ds.clock.Now, Timeout: 500 * time.Millisecond})
}

// url is the document's client_id: at example.com, on the test server's
// port.
func (ds *docServer) url(path string) string {
	_, port, _ := net.SplitHostPort(ds.srv.Listener.Addr().String())
	return "https://example.com:" + port + path
}

func (ds *docServer) serve(path string, h http.HandlerFunc) {
	ds.mu.Lock()
	ds.routes[path] = h
	ds.mu.Unlock()
}

// serveDoc serves doc as JSON with the given headers.
func (ds *docServer) serveDoc(path string, doc map[string]any, headers ...string) {
	b, _ := json.Marshal(doc)
	ds.serve(path, func(w http.ResponseWriter, r *http.Request) {
		for i := 0; i+1 < len(headers); i += 2 {
			w.Header().Set(headers[i], headers[i+1])
		}
		if etag := w.Header().Get("ETag"); etag != "" && r.Header.Get("If-None-Match") == etag {
			w.WriteHeader(http.StatusNotModified)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write(b)
	})
}

func (ds *docServer) doc(path string) map[string]any {
	return map[string]any{
		"client_id": ds.url(path), "client_name": "Example Assistant", "client_uri": "https://example.com",
		"redirect_uris":              []string{"https://example.com/callback", "http://127.0.0.1/callback"},
		"token_endpoint_auth_method": "none", "grant_types": []string{"authorization_code", "refresh_token"},
	}
}

// refusal fetches and wants a *clientmeta.Error whose text says want.
func refusal(t *testing.T, f *clientmeta.Fetcher, clientID, want string) {
	t.Helper()
	doc, err := f.Fetch(context.Background(), clientID)
	var ce *clientmeta.Error
	if !errors.As(err, &ce) {
		t.Fatalf("Fetch(%s) = %+v, %v; want a refusal saying %q", clientID, doc, err, want)
	}
	if !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), clientID) {
		t.Errorf("Fetch(%s): %q; want it to name the URL and say %q", clientID, err, want)
	}
}

// Ensure that a client's document is fetched over https through the
// guard and read: its name and redirect URIs, exactly as served.
func TestFetch_ReadsTheDocument(t *testing.T) {
	ds, f := newDocServer(t)
	ds.serveDoc("/client.json", ds.doc("/client.json"))
	doc, err := f.Fetch(context.Background(), ds.url("/client.json"))
	if err != nil {
		t.Fatal(err)
	}
	if doc.ClientID != ds.url("/client.json") || doc.ClientName != "Example Assistant" ||
		strings.Join(doc.RedirectURIs, " ") != "https://example.com/callback http://127.0.0.1/callback" {
		t.Errorf("document %+v", doc)
	}
}

// Ensure that the document's HTTP caching is honoured: kept for its
// max-age, then revalidated with its ETag (a 304 keeps it), never kept
// under no-store, and a changed document is seen once the cached copy is
// stale.
func TestFetch_HonoursHTTPCaching(t *testing.T) {
	ds, f := newDocServer(t)
	ctx := context.Background()
	ds.serveDoc("/cached.json", ds.doc("/cached.json"), "Cache-Control", "max-age=60", "ETag", `"v1"`)
	for i := 0; i < 3; i++ {
		if _, err := f.Fetch(ctx, ds.url("/cached.json")); err != nil {
			t.Fatal(err)
		}
	}
	if n := ds.hits.Load(); n != 1 {
		t.Errorf("3 fetches within max-age reached the server %d times, want 1", n)
	}
	ds.clock.advance(61 * time.Second)
	if _, err := f.Fetch(ctx, ds.url("/cached.json")); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Fetch(ctx, ds.url("/cached.json")); err != nil {
		t.Fatal(err)
	}
	if n := ds.hits.Load(); n != 2 {
		t.Errorf("after max-age: %d requests in all, want 2 (one revalidation, answered 304, fresh again)", n)
	}

	ds.hits.Store(0)
	ds.serveDoc("/nostore.json", ds.doc("/nostore.json"), "Cache-Control", "no-store")
	for i := 0; i < 2; i++ {
		if _, err := f.Fetch(ctx, ds.url("/nostore.json")); err != nil {
			t.Fatal(err)
		}
	}
	if n := ds.hits.Load(); n != 2 {
		t.Errorf("no-store: 2 fetches reached the server %d times, want 2", n)
	}

	changed := ds.doc("/cached.json")
	changed["client_name"] = "Renamed"
	ds.serveDoc("/cached.json", changed, "Cache-Control", "max-age=60", "ETag", `"v2"`)
	if doc, _ := f.Fetch(ctx, ds.url("/cached.json")); doc == nil || doc.ClientName != "Example Assistant" {
		t.Errorf("within max-age: %+v, want the cached copy", doc)
	}
	ds.clock.advance(61 * time.Second)
	if doc, _ := f.Fetch(ctx, ds.url("/cached.json")); doc == nil || doc.ClientName != "Renamed" {
		t.Errorf("after max-age: %+v, want the changed document", doc)
	}
}

// Ensure that a document whose client_id is not its URL is refused.
func TestFetch_RefusesAnotherClientID(t *testing.T) {
	ds, f := newDocServer(t)
	doc := ds.doc("/client.json")
	doc["client_id"] = "https://other.example/client.json"
	ds.serveDoc("/client.json", doc)
	refusal(t, f, ds.url("/client.json"), `its client_id is "https://other.example/client.json", not the URL`)
}

// Ensure that a document on a private or loopback address is refused
// before any connection is made.
func TestFetch_RefusesPrivateAddresses(t *testing.T) {
	ds, f := newDocServer(t)
	ds.serveDoc("/client.json", ds.doc("/client.json"))
	_, port, _ := net.SplitHostPort(ds.srv.Listener.Addr().String())
	refusal(t, f, "https://private.example.com:"+port+"/client.json", "not on the public internet (10.1.2.3, private network")
	refusal(t, f, "https://127.0.0.1:"+port+"/client.json", "not on the public internet (127.0.0.1, loopback")
	if n := ds.hits.Load(); n != 0 {
		t.Errorf("%d requests reached the server", n)
	}
}

// Ensure that a document larger than the limit is refused, whether it
// says its length or not.
func TestFetch_RefusesTooLarge(t *testing.T) {
	ds, f := newDocServer(t)
	doc := ds.doc("/big.json")
	doc["client_name"] = strings.Repeat("x", clientmeta.MaxBytes)
	ds.serveDoc("/big.json", doc)
	refusal(t, f, ds.url("/big.json"), "more than the 5120 bytes")
	big, _ := json.Marshal(doc)
	ds.serve("/chunked.json", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		for i := 0; i < len(big); i += 512 {
			w.Write(big[i:min(i+512, len(big))])
			w.(http.Flusher).Flush()
		}
	})
	refusal(t, f, ds.url("/chunked.json"), "more than the 5120 bytes")
}

// Ensure that a document that does not answer in time is refused.
func TestFetch_RefusesSlow(t *testing.T) {
	ds, f := newDocServer(t)
	release := make(chan struct{})
	defer close(release)
	ds.serve("/slow.json", func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	})
	refusal(t, f, ds.url("/slow.json"), "no answer within 500ms")
}

// Ensure that client_id URLs the draft forbids, redirects, other content
// types, documents without redirect URIs and documents with a secret are
// refused, each saying why.
func TestFetch_RefusesBadDocuments(t *testing.T) {
	ds, f := newDocServer(t)
	for clientID, want := range map[string]string{
		"http://example.com/client.json":                   "must be https",
		"https://example.com":                              "has no path",
		"https://example.com/":                             "has no path",
		"https://u:p@example.com/client.json":              "carries credentials",
		"https://example.com/client.json#x":                "has a fragment",
		"https://example.com/a/../client.json":             ". or .. segment",
		"https://example.com/" + strings.Repeat("a", 2000): "longer than 2000",
	} {
		refusal(t, f, clientID, want)
	}
	ds.serve("/moved.json", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "https://127.0.0.1/client.json", http.StatusFound)
	})
	refusal(t, f, ds.url("/moved.json"), "answered 302 (a redirect to")
	ds.serve("/html.json", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		w.Write([]byte("<html>"))
	})
	refusal(t, f, ds.url("/html.json"), `served as "text/html"`)
	refusal(t, f, ds.url("/missing.json"), "answered 404")

	noRedirects := ds.doc("/none.json")
	delete(noRedirects, "redirect_uris")
	ds.serveDoc("/none.json", noRedirects)
	refusal(t, f, ds.url("/none.json"), "lists no redirect_uris")
	secret := ds.doc("/secret.json")
	secret["client_secret"] = "s3cret"
	ds.serveDoc("/secret.json", secret)
	refusal(t, f, ds.url("/secret.json"), "carries a client_secret")
	basic := ds.doc("/basic.json")
	basic["token_endpoint_auth_method"] = "client_secret_basic"
	ds.serveDoc("/basic.json", basic)
	refusal(t, f, ds.url("/basic.json"), `token_endpoint_auth_method is "client_secret_basic"`)
}
