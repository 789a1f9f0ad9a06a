package drill

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
)

// readerAgent is the cluster drill's agent that reads a file: it
// downloads every link the gateway gave it (x-holon-files) and answers
// with the SHA-256 of what it read, so that the drill can hold it against
// what the upload was answered.
func (a *agentServer) readerAgent() agentSpec {
	return agentSpec{name: "reader", price: "0.01", timeout: 30, handler: a.read,
		input: "{type: object, additionalProperties: false, properties: {n: {type: string, maxLength: 200}, file: {type: string, maxLength: 200}}}"}
}

func (a *agentServer) read(w http.ResponseWriter, r *http.Request) {
	in, _ := a.executed(r)
	var links map[string]struct {
		URL string `json:"url"`
	}
	if err := json.Unmarshal([]byte(r.Header.Get("x-holon-files")), &links); err != nil || len(links) != 1 {
		w.WriteHeader(http.StatusBadRequest)
		fmt.Fprintf(w, `{"error":{"code":"no_file","message":"%d links: %v"}}`, len(links), err)
		return
	}
	for _, l := range links {
		resp, err := a.client.Get(l.URL)
		if err != nil {
			w.WriteHeader(http.StatusBadGateway)
			return
		}
		h := sha256.New()
		_, err = io.Copy(h, resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK {
			w.WriteHeader(http.StatusBadGateway)
			return
		}
		writeAgentJSON(w, map[string]any{"n": in.N, "sha256": hex.EncodeToString(h.Sum(nil))})
	}
}

// clusterFiles uploads files through one gateway and has the reader agent
// read each one through another, right after its 201.
type clusterFiles struct {
	l     *crashLoad
	mu    sync.Mutex
	files map[string]string // id -> SHA-256
}

// run uploads and reads until ctx ends.
func (f *clusterFiles) run(ctx context.Context, rng *rand.Rand) {
	l := f.l
	for ctx.Err() == nil {
		n := 1 + rng.IntN(4<<10)
		if rng.IntN(8) == 0 {
			n = 1 + rng.IntN(256<<10)
		}
		body := make([]byte, n)
		for i := range body {
			body[i] = byte(rng.Uint32())
		}
		g := rng.IntN(len(l.apis))
		a, err := l.at(g, 0).do(ctx, "POST", "/v0/files", l.acc.human, body, "Content-Type", "application/octet-stream")
		l.d.count("uploads sent", 1)
		if err != nil || a.Status != http.StatusCreated {
			if err == nil {
				l.d.count(fmt.Sprintf("uploads answered %d %s", a.Status, a.code()), 1)
			}
			l.lost(ctx)
			continue
		}
		var got struct {
			File   string `json:"file"`
			SHA256 string `json:"sha256"`
		}
		_ = json.Unmarshal(a.Body, &got)
		sum := sha256.Sum256(body)
		want := hex.EncodeToString(sum[:])
		l.d.check("an upload answered 201 names its SHA-256", got.SHA256 == want, "%s: sha %s, sent %s", got.File, got.SHA256, want)
		l.d.count("uploads answered 201", 1)
		f.mu.Lock()
		f.files[strings.TrimPrefix(got.File, "holon://files/")] = want
		f.mu.Unlock()
		// Read through another gateway, retried while the answer is
		// lost (a kill) or the store is away.
		for attempt := 1; attempt < 50 && ctx.Err() == nil; attempt++ {
			r, err := l.at(g, attempt).call(context.WithoutCancel(ctx), l.acc.human, "crasher/main", "drill/reader", agentInput{N: l.nonce("read"), File: got.File}, "")
			if err != nil || r.code() == "store_unavailable" || r.code() == "gateway_restarted" {
				l.lost(ctx)
				continue
			}
			l.took(r)
			if r.Status == http.StatusOK {
				var out struct {
					SHA256 string `json:"sha256"`
				}
				_ = json.Unmarshal(r.Output, &out)
				l.d.check("a file uploaded through one gateway is read whole through another", out.SHA256 == want,
					"%s read as %s through gateway %d, uploaded through gateway %d as %s", got.File, out.SHA256, (g+attempt)%len(l.apis)+1, g+1, want)
				l.d.count("files read through another gateway than their upload's", 1)
			} else {
				// A kill or an outage while the agent downloads: the
				// call fails unbilled, counted by took.
				l.d.count("file reads that failed (a kill or an outage meanwhile)", 1)
			}
			break
		}
	}
}
