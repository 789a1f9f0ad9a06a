package main

import (
	"io"
	"net/http"
	"sync"
	"time"
)

// defaultBodyTimeout bounds the reading of one request body: the largest
// body the API takes (4 MiB) arrives in it at about 70 KB/s.
const defaultBodyTimeout = 60 * time.Second

// boundBodies sets a read deadline of timeout on every request that has a
// body, so a client that trickles its body holds a connection and a
// goroutine that long at most, and lifts it once the body is read: a
// handler that then answers for long (a call, an MCP stream on POST /mcp)
// is not cut. A request without a body (such as the GET /mcp event stream)
// is left alone; the server's ReadHeaderTimeout has bounded its header.
func boundBodies(h http.Handler, timeout time.Duration) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Body == nil || r.Body == http.NoBody {
			h.ServeHTTP(w, r)
			return
		}
		rc := http.NewResponseController(w)
		if rc.SetReadDeadline(time.Now().Add(timeout)) == nil {
			r.Body = &deadlineBody{ReadCloser: r.Body, lift: func() { rc.SetReadDeadline(time.Time{}) }}
		}
		h.ServeHTTP(w, r)
	})
}

// deadlineBody lifts the read deadline once its body has been read to the
// end.
type deadlineBody struct {
	io.ReadCloser
	once sync.Once
	lift func()
}

func (b *deadlineBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err == io.EOF {
		b.once.Do(b.lift)
	}
	return n, err
}
