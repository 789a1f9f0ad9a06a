package backup_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"

	"holon.dev/holon/backup"
	"holon.dev/holon/journal"
	"holon.dev/holon/kv"
)

// Ensure that the live backup endpoint streams a complete, checked backup
// of the store as JSON Lines, answers HEAD with the headers only, and
// refuses other methods.
func TestHandler(t *testing.T) {
	s, err := kv.Open(filepath.Join(t.TempDir(), "holon.db"), kv.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	e, err := journal.Transfer("signup:alice", "external:demo-credit", "alice", journal.MustParseAmount("5.00"))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Update(context.Background(), func(tx *kv.Tx) error { _, err := tx.AppendEntry(e); return err }); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(backup.Handler(s))
	defer srv.Close()

	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "application/x-ndjson" || resp.Header.Get("Cache-Control") != "no-store" {
		t.Errorf("GET: %d %v", resp.StatusCode, resp.Header)
	}
	sum, err := backup.Check(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if sum.Header.Tables["journal"].Rows != 1 || sum.Header.Tables["accounts"].Rows != 2 || sum.Header.Gateway == "" {
		t.Errorf("header %+v", sum.Header)
	}

	resp, err = http.Head(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || len(body) != 0 {
		t.Errorf("HEAD: %d, %d bytes", resp.StatusCode, len(body))
	}
	resp, err = http.Post(srv.URL, "text/plain", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("POST: %d, want 405", resp.StatusCode)
	}
}
