package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Ensure that --idempotency-ttl sets how long a key is kept: within it a
// re-sent call replays its receipt, after it the call runs again; and that
// a lifetime of zero or below is refused.
func TestServe_IdempotencyTTL(t *testing.T) {
	db := filepath.Join(t.TempDir(), "holon.db")
	for _, ttl := range []string{"0s", "-1h"} {
		var stderr lockedBuffer
		m := &Main{Stdout: &lockedBuffer{}, Stderr: &stderr, Getenv: func(string) string { return "" }}
		if code := m.Run(context.Background(), []string{"serve", "--db", db, "--idempotency-ttl", ttl}); code != 1 || !strings.Contains(stderr.String(), "--idempotency-ttl") {
			t.Errorf("--idempotency-ttl %s: exit %d, %q; want 1 and the flag named", ttl, code, stderr.String())
		}
	}

	rs := startServe(t, map[string]string{"HOLON_REGISTRY": "agents,examples"}, "--addr", "127.0.0.1:0", "--db", db, "--idempotency-ttl", "1s")
	call := func() (int, string, bool) {
		body := `{"mandate":"alice/sandbox","agent":"holon-labs/company-lookup","input":{"name":"Globex GmbH"}}`
		req, _ := http.NewRequest(http.MethodPost, "http://"+rs.addrs["api"]+"/v0/calls", bytes.NewReader([]byte(body)))
		req.Header.Set("Idempotency-Key", "ttl-1")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out struct {
			Receipt  struct{ ID string }
			Replayed bool
		}
		if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
			t.Fatal(err)
		}
		return resp.StatusCode, out.Receipt.ID, out.Replayed
	}
	status, first, _ := call()
	if status != http.StatusOK {
		t.Fatalf("the call: %d", status)
	}
	if code, id, replayed := call(); code != status || id != first || !replayed {
		t.Errorf("within the lifetime: %d %s replayed=%v, want the replay of %s", code, id, replayed, first)
	}
	time.Sleep(1100 * time.Millisecond)
	if code, id, replayed := call(); code != status || id == first || replayed {
		t.Errorf("after the lifetime: %d %s replayed=%v, want a new call", code, id, replayed)
	}
}
