package appliance_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"holon.dev/holon/appliance/files"
)

// Ensure that an upload answers its handle, size, declared type, SHA-256
// and expiry (24 hours on), with a human key and with an agent key; that
// a key is needed; and that a form or a malformed type is refused.
func TestFiles_Upload(t *testing.T) {
	fa := newFilesApp(t)
	ann := fa.signup("ann")
	body := []byte("name,age\nAda,36\n")
	for _, c := range []client{ann.human, ann.agent} {
		status, out := c.upload("text/csv; charset=utf-8", body)
		if status != http.StatusCreated {
			t.Fatalf("upload: %d %v", status, out)
		}
		if !regexp.MustCompile(`^holon://files/[0-9a-f]{24}$`).MatchString(str(out["file"])) ||
			out["size"] != float64(len(body)) || out["content_type"] != "text/csv; charset=utf-8" ||
			out["sha256"] != sha256Hex(body) || out["expires"] != "2026-12-02T09:00:00Z" {
			t.Errorf("answer: %v", out)
		}
	}
	if status, out := ann.human.upload("", []byte("x")); status != http.StatusCreated || out["content_type"] != "application/octet-stream" {
		t.Errorf("no Content-Type: %d %v", status, out)
	}
	for _, ct := range []string{"multipart/form-data; boundary=x", "not a type"} {
		if status, out := ann.human.upload(ct, body); status != http.StatusBadRequest || errorCode(out) != "invalid_request" {
			t.Errorf("Content-Type %q: %d %v", ct, status, out)
		}
	}
	if status, out := fa.anonymous().upload("text/plain", body); status != http.StatusUnauthorized {
		t.Errorf("no key: %d %v", status, out)
	}
	if status, out := fa.admin().upload("text/plain", body); status != http.StatusForbidden {
		t.Errorf("admin key: %d %v", status, out)
	}
	if got := blobs(t, fa.cfg.DB+".files"); len(got) != 2 {
		t.Errorf("blobs %v: want the CSV once (uploaded twice) and the x", got)
	}
}

// endless is a body of n bytes made on the fly, counting what was read.
type endless struct {
	left int64
	read atomic.Int64
}

func (e *endless) Read(p []byte) (int, error) {
	if e.left <= 0 {
		return 0, io.EOF
	}
	n := int64(len(p))
	if n > e.left {
		n = e.left
	}
	for i := range p[:n] {
		p[i] = 'a'
	}
	e.left -= n
	e.read.Add(n)
	return int(n), nil
}

// Ensure that 20 MB + 1 byte is refused while it streams, and so is a 2 GB
// body: sent without a length (chunked), the gateway stops reading past
// the limit; with its length declared, it refuses before reading. It keeps
// none of it, and memory stays flat (far less is allocated than the body
// holds); exactly 20 MB is accepted.
func TestFiles_TooLargeRefusedWhileStreaming(t *testing.T) {
	fa := newFilesApp(t)
	ann := fa.signup("ann")
	post := func(size int64, chunked bool) (int, string, int64, uint64) {
		body := &endless{left: size}
		req, err := http.NewRequest("POST", fa.srv.URL+"/v0/files", body)
		if err != nil {
			t.Fatal(err)
		}
		req.ContentLength = size
		if chunked {
			req.ContentLength = -1
		}
		req.Header.Set("Authorization", "Bearer "+ann.humanKey)
		req.Header.Set("Content-Type", "application/octet-stream")
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("POST %d bytes: %v", size, err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		runtime.ReadMemStats(&after)
		return resp.StatusCode, string(b), body.read.Load(), after.TotalAlloc - before.TotalAlloc
	}
	for _, c := range []struct {
		size    int64
		chunked bool
	}{{files.MaxFileSize + 1, true}, {2 << 30, true}, {files.MaxFileSize + 1, false}, {2 << 30, false}} {
		size := c.size
		status, body, read, alloc := post(size, c.chunked)
		t.Logf("%d bytes, chunked %v: %d after %d bytes sent, %d bytes allocated", size, c.chunked, status, read, alloc)
		if status != http.StatusRequestEntityTooLarge || !strings.Contains(body, `"file_too_large"`) {
			t.Errorf("%d bytes: %d %s", size, status, body)
		}
		if read > files.MaxFileSize+16<<20 {
			t.Errorf("%d bytes: the client sent %d bytes before the refusal, want the gateway to stop near 20 MB", size, read)
		}
		if alloc > 8<<20 {
			t.Errorf("%d bytes: %d bytes allocated meanwhile: the body was held in memory", size, alloc)
		}
	}
	if tmp, _ := os.ReadDir(filepath.Join(fa.cfg.DB+".files", "tmp")); len(tmp) != 0 || len(blobs(t, fa.cfg.DB+".files")) != 0 {
		t.Errorf("refused uploads left %d partial files and %v", len(tmp), blobs(t, fa.cfg.DB+".files"))
	}
	if status, body, _, _ := post(files.MaxFileSize, true); status != http.StatusCreated {
		t.Errorf("exactly 20 MB: %d %s", status, body)
	}
}

// Ensure that an account keeps at most 200 MB of live files, counted as
// uploaded (the same bytes twice count twice), that another account is
// not affected, and that the quota frees itself 24 hours after the
// uploads, when the sweeper deletes the files and their bytes.
func TestFiles_AccountQuota(t *testing.T) {
	fa := newFilesApp(t)
	ann, bob := fa.signup("ann"), fa.signup("bob")
	big := bytes.Repeat([]byte("0123456789abcdef"), files.MaxFileSize/16)
	var handles []string
	for range files.MaxAccountFiles / files.MaxFileSize {
		handles = append(handles, ann.agent.mustUpload("application/octet-stream", big))
		fa.advance(time.Minute)
	}
	status, out := ann.human.upload("text/plain", []byte("x"))
	if status != http.StatusRequestEntityTooLarge || errorCode(out) != files.CodeFileQuota {
		t.Fatalf("one byte past 200 MB: %d %v", status, out)
	}
	bob.human.mustUpload("text/plain", []byte("bob's"))

	// 24 hours after the first upload, only the first file is gone.
	fa.advance(24*time.Hour - 10*time.Minute)
	if n, err := fa.app.SweepFiles(context.Background()); err != nil || n != 1 {
		t.Fatalf("sweep: %d deleted, %v; want the first file", n, err)
	}
	ann.human.mustUpload("text/plain", []byte("x"))
	if status, out := ann.human.upload("text/plain", big); status != http.StatusRequestEntityTooLarge || errorCode(out) != files.CodeFileQuota {
		t.Errorf("20 MB more with 180 MB + 1 byte live: %d %v", status, out)
	}
	// The same without a declared length: refused once past the quota.
	req, _ := http.NewRequest("POST", fa.srv.URL+"/v0/files", &endless{left: files.MaxFileSize})
	req.Header.Set("Authorization", "Bearer "+ann.humanKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestEntityTooLarge || !strings.Contains(string(b), files.CodeFileQuota) {
		t.Errorf("20 MB more, chunked: %d %s", resp.StatusCode, b)
	}
	// A day later everything is gone: the quota and the disk are free.
	fa.advance(24 * time.Hour)
	if n, err := fa.app.SweepFiles(context.Background()); err != nil || n != len(handles)-1+2 {
		t.Fatalf("sweep: %d deleted, %v", n, err)
	}
	if got := blobs(t, fa.cfg.DB+".files"); len(got) != 0 {
		t.Errorf("bytes left after every file expired: %v", got)
	}
	for range 2 {
		ann.human.mustUpload("application/octet-stream", big)
	}
}

// Ensure that the sweeper survives restarts: a file that expired while the
// gateway was stopped is deleted after the next start, with no call to
// SweepFiles.
func TestFiles_SweeperSurvivesRestart(t *testing.T) {
	fa := newFilesApp(t)
	ann := fa.signup("ann")
	ann.human.mustUpload("text/plain", []byte("short-lived"))
	dir := fa.cfg.DB + ".files"
	fa.shutdown(true)
	fa.advance(25 * time.Hour)
	fa.open()
	for deadline := time.Now().Add(10 * time.Second); len(blobs(t, dir)) > 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the expired file is still there after the restart: %v", blobs(t, dir))
		}
	}
}

// Ensure that on a dev gateway, which has no accounts, an upload names the
// mandate whose issuer owns the file, and calls under that issuer's
// mandates can pass it.
func TestFiles_DevGateway(t *testing.T) {
	ta := newTestApp(t, "", nil)
	post := func(path string) (int, map[string]any) {
		resp, err := http.Post(ta.srv.URL+path, "text/plain", strings.NewReader("Widget, 2, 3.00\n"))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out map[string]any
		json.NewDecoder(resp.Body).Decode(&out)
		return resp.StatusCode, out
	}
	if status, out := post("/v0/files"); status != http.StatusBadRequest || !strings.Contains(str(out["error"]), "?mandate=") {
		t.Errorf("no mandate: %d %v", status, out)
	}
	if status, out := post("/v0/files?mandate=nobody/none"); status != http.StatusNotFound {
		t.Errorf("an unknown mandate: %d %v", status, out)
	}
	status, out := post("/v0/files?mandate=alice/bookkeeping-q4")
	if status != http.StatusCreated {
		t.Fatalf("upload: %d %v", status, out)
	}
	status, out = ta.do("POST", "/v0/calls", map[string]any{"mandate": "alice/sandbox", "agent": "holon-labs/text-tables", "input": map[string]any{"file": out["file"]}})
	if status != http.StatusOK {
		t.Errorf("a call under another of alice's mandates: %d %v", status, out)
	}
}

// barrier is an empty body part that waits for the others to reach it.
type barrier struct{ wg *sync.WaitGroup }

func (b barrier) Read([]byte) (int, error) {
	b.wg.Done()
	b.wg.Wait()
	return 0, io.EOF
}

// Ensure that uploads racing for an account's last 20 MB cannot both get
// it: the quota is checked again in the transaction that records a file.
func TestFiles_QuotaRace(t *testing.T) {
	fa := newFilesApp(t)
	ann := fa.signup("ann")
	big := bytes.Repeat([]byte("q"), files.MaxFileSize)
	for range files.MaxAccountFiles/files.MaxFileSize - 1 {
		ann.human.mustUpload("application/octet-stream", big)
	}
	// Each body stops one byte short until both are that far: both
	// uploads have passed the first check of the quota.
	var almost sync.WaitGroup
	almost.Add(2)
	statuses := make(chan int, 2)
	for i := range 2 {
		go func() {
			body := io.MultiReader(&endless{left: files.MaxFileSize - int64(i) - 1}, barrier{&almost}, strings.NewReader("z"))
			req, _ := http.NewRequest("POST", fa.srv.URL+"/v0/files", body)
			req.Header.Set("Authorization", "Bearer "+ann.humanKey)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Error(err)
				statuses <- 0
				return
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			statuses <- resp.StatusCode
		}()
	}
	got := map[int]int{}
	for range 2 {
		got[<-statuses]++
	}
	if got[http.StatusCreated] != 1 || got[http.StatusRequestEntityTooLarge] != 1 {
		t.Errorf("two uploads for the last 20 MB: %v, want one 201 and one 413", got)
	}
}

// Ensure that the same bytes uploaded twice are stored once and stay
// until the last file naming them is deleted.
func TestFiles_SameBytesTwice(t *testing.T) {
	fa := newFilesApp(t)
	ann := fa.signup("ann")
	mandate := filesMandate(ann)
	doc := []byte("Widget, 2, 3.00\n")
	ann.human.mustUpload("text/plain", doc)
	fa.advance(12 * time.Hour)
	second := ann.human.mustUpload("text/plain", doc)
	fa.advance(12 * time.Hour)
	if n, err := fa.app.SweepFiles(context.Background()); err != nil || n != 1 {
		t.Fatalf("sweep: %d, %v", n, err)
	}
	if got := blobs(t, fa.cfg.DB+".files"); len(got) != 1 {
		t.Fatalf("blobs %v, want the bytes the second file still names", got)
	}
	if status, out := ann.human.callWith(mandate, "holon-labs/text-tables", map[string]any{"file": second}); status != http.StatusOK {
		t.Errorf("the second file: %d %v", status, out)
	}
	fa.advance(12 * time.Hour)
	if n, err := fa.app.SweepFiles(context.Background()); err != nil || n != 1 || len(blobs(t, fa.cfg.DB+".files")) != 0 {
		t.Errorf("sweep: %d, %v, blobs %v", n, err, blobs(t, fa.cfg.DB+".files"))
	}
}
