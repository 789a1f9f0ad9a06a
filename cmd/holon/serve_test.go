package main

import (
	"bytes"
	"context"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func productionEnv() map[string]string {
	return map[string]string{
		"HOLON_ENV":         "production",
		"HOLON_PUBLIC_URL":  "https://gw.example.com",
		"HOLON_SITE_URL":    "https://example.com",
		"HOLON_FILE_SECRET": "f1Le-S3cret-9aZ7qW2xE4rT6yU8iO0pL5kJ",
		"HOLON_ADMIN_KEY":   "aDm1n-K3y-7hG5fD3sA1zX9cV7bN5mQ2wE",
		"HOLON_TRUST_PROXY": "1",
	}
}

// Ensure that holon serve in production exits 1 without each required
// setting, naming it, and never for a missing GitHub setting.
func TestServe_ProductionRefusesToStart(t *testing.T) {
	for _, missing := range []string{"HOLON_PUBLIC_URL", "HOLON_SITE_URL", "HOLON_FILE_SECRET", "HOLON_ADMIN_KEY", "HOLON_TRUST_PROXY"} {
		env := productionEnv()
		delete(env, missing)
		var stderr bytes.Buffer
		m := &Main{Stdout: &bytes.Buffer{}, Stderr: &stderr, Getenv: func(k string) string { return env[k] }}
		code := m.Run(context.Background(), []string{"serve", "--hosted", "--addr", "127.0.0.1:0", "--db", filepath.Join(t.TempDir(), "holon.db")})
		if code != 1 || !strings.Contains(stderr.String(), missing) {
			t.Errorf("without %s: exit %d, stderr %q; want 1 naming it", missing, code, stderr.String())
		}
	}
	env := productionEnv()
	var stderr bytes.Buffer
	m := &Main{Stdout: &bytes.Buffer{}, Stderr: &stderr, Getenv: func(k string) string { return env[k] }}
	if code := m.Run(context.Background(), []string{"serve", "--addr", "127.0.0.1:0", "--db", filepath.Join(t.TempDir(), "holon.db")}); code != 1 || !strings.Contains(stderr.String(), "--hosted") {
		t.Errorf("production without --hosted: exit %d, stderr %q", code, stderr.String())
	}
}

// Ensure that holon serve --hosted with a complete production environment
// (and no GitHub settings) starts, serves, requires keys, and stops
// cleanly on cancel.
func TestServe_ProductionStarts(t *testing.T) {
	env := productionEnv()
	var stderr bytes.Buffer
	ready := make(chan string, 1)
	c := &serveCommand{stderr: &stderr, getenv: func(k string) string { return env[k] }, ready: func(addr string) { ready <- addr }}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- c.Run(ctx, []string{"--hosted", "--addr", "127.0.0.1:0", "--db", filepath.Join(t.TempDir(), "holon.db")})
	}()
	var addr string
	select {
	case addr = <-ready:
	case err := <-done:
		t.Fatalf("serve stopped: %v\n%s", err, stderr.String())
	case <-time.After(20 * time.Second):
		t.Fatal("serve did not start")
	}
	for path, want := range map[string]int{"/healthz": 200, "/v0/me": 401, "/v0/agents": 200} {
		resp, err := http.Get("http://" + addr + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("GET %s: %d, want %d", path, resp.StatusCode, want)
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("serve: %v", err)
	}
	if strings.Contains(stderr.String(), env["HOLON_ADMIN_KEY"]) {
		t.Error("the admin key is in the logs")
	}
}
