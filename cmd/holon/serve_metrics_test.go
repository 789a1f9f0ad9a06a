package main

import (
	"net/http"
	"path/filepath"
	"testing"
	"time"
)

// Ensure that holon serve exposes /metrics in the Prometheus text format,
// open on a dev gateway's API and on --metrics-addr, with every family the
// operator needs (calls by agent and status, latency histograms, commit
// batch sizes, holds open, store size), and that the values move with
// the calls: a running call shows as a hold, counters and histograms count
// what was answered.
func TestServe_Metrics(t *testing.T) {
	registry, mandates := opsDirs(t)
	env := map[string]string{"HOLON_REGISTRY": "agents," + registry}
	rs := startServe(t, env, "--addr", "127.0.0.1:0", "--metrics-addr", "127.0.0.1:0",
		"--db", filepath.Join(t.TempDir(), "holon.db"), "--mandates", mandates)
	api, metricsURL := "http://"+rs.addrs["api"], "http://"+rs.addrs["metrics"]+"/metrics"
	if rs.addrs["metrics"] == "" {
		t.Fatalf("no metrics listener: %v", rs.addrs)
	}

	before := scrape(t, metricsURL, "")
	for _, name := range []string{
		"holon_calls_total", "holon_call_duration_seconds", "holon_store_commit_batch_size",
		"holon_holds_open", "holon_store_size_bytes", "holon_store_commits_total", "holon_store_updates_total",
		"holon_http_requests_total", "holon_http_requests_in_flight", "holon_calls_closed_at_start",
		"go_goroutines", "process_resident_memory_bytes",
	} {
		// Vectors with no sample yet are not written; their help is.
		if _, ok := before[name]; !ok && name != "holon_calls_total" && name != "holon_call_duration_seconds" && name != "holon_http_requests_total" {
			t.Errorf("no %s family before any call", name)
		}
	}
	commits0, _ := metricValue(before, "holon_store_commits_total", nil)
	batches0, _ := metricValue(before, "holon_store_commit_batch_size", nil)
	if size, _ := metricValue(before, "holon_store_size_bytes", nil); size <= 0 {
		t.Errorf("holon_store_size_bytes = %v", size)
	}

	c := &http.Client{Timeout: 20 * time.Second}
	call := func(in map[string]any) int {
		return do(t, c, "POST", api+"/v0/calls", "", map[string]any{"mandate": "ops/test", "agent": "ops-test/slow", "input": in}, nil)
	}
	// A slow call in flight holds money: holds open is 1 while it runs.
	slow := make(chan int, 1)
	go func() { slow <- call(map[string]any{"ms": 1500, "word": "slow"}) }()
	deadline := time.Now().Add(10 * time.Second)
	for {
		m := scrape(t, metricsURL, "")
		holds, _ := metricValue(m, "holon_holds_open", nil)
		inFlight, _ := metricValue(m, "holon_http_requests_in_flight", nil)
		if holds == 1 && inFlight == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("holds open %v, requests in flight %v while a call runs; want 1 and 1", holds, inFlight)
		}
		time.Sleep(50 * time.Millisecond)
	}
	for i := 0; i < 2; i++ {
		if code := call(map[string]any{"ms": 0, "word": "quick"}); code != http.StatusOK {
			t.Fatalf("call: %d", code)
		}
	}
	if code := call(map[string]any{"ms": 0}); code != http.StatusUnprocessableEntity {
		t.Fatalf("call without word: %d, want 422", code)
	}
	if code := <-slow; code != http.StatusOK {
		t.Fatalf("slow call: %d", code)
	}

	// The API serves the same metrics, open on a dev gateway.
	after := scrape(t, api+"/metrics", "")
	agent := "ops-test/slow@1.0.0"
	for _, tc := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"holon_calls_total", map[string]string{"agent": agent, "status": "succeeded", "error": ""}, 3},
		{"holon_calls_total", map[string]string{"agent": agent, "status": "rejected", "error": "rejected_input"}, 1},
		{"holon_call_duration_seconds", map[string]string{"agent": agent, "status": "succeeded"}, 3},
		{"holon_holds_open", nil, 0},
		{"holon_http_requests_total", map[string]string{"method": "POST", "code": "200"}, 3},
		{"holon_http_requests_total", map[string]string{"method": "POST", "code": "422"}, 1},
		{"holon_calls_closed_at_start", nil, 0},
	} {
		if got, ok := metricValue(after, tc.name, tc.labels); !ok || got != tc.want {
			t.Errorf("%s%v = %v (present %v), want %v", tc.name, tc.labels, got, ok, tc.want)
		}
	}
	if sum := histogramSum(after, "holon_call_duration_seconds", map[string]string{"agent": agent, "status": "succeeded"}); sum < 1.5 {
		t.Errorf("latency sum %vs, want at least the slow call's 1.5 s", sum)
	}
	commits1, _ := metricValue(after, "holon_store_commits_total", nil)
	batches1, _ := metricValue(after, "holon_store_commit_batch_size", nil)
	// Each run commits its settlement (an in-process agent's reservation
	// is held in memory), the refusal its receipt, and the first call took
	// a block of receipt ids.
	if commits1-commits0 < 5 || batches1-batches0 < 5 {
		t.Errorf("commits %v → %v, batch observations %v → %v: want at least 5 more", commits0, commits1, batches0, batches1)
	}
}
