package appliance_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"holon.dev/holon/appliance"
	"holon.dev/holon/appliance/ops"
	"holon.dev/holon/backup"
	"holon.dev/holon/kv"
)

// Ensure that on a hosted gateway /metrics answers 401 without the admin
// key (and with an account-shaped or wrong key), and the Prometheus text
// format with it; and that MetricsHandler, for a listener of its own,
// needs no key.
func TestMetrics_HostedNeedsAdminKey(t *testing.T) {
	const admin = "aDm1n-K3y-7hG5fD3sA1zX9cV7bN5mQ2wE"
	app, err := appliance.Open(context.Background(), appliance.Config{OpenStore: kv.OpenStore, Backup: backup.StoreHandler,
		DB: filepath.Join(t.TempDir(), "holon.db"), NoSync: true, Hosted: true, AdminKey: admin,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer app.Close()
	get := func(h http.Handler, auth string) *http.Response {
		t.Helper()
		req := httptest.NewRequest("GET", ops.MetricsPath, nil)
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec.Result()
	}
	for _, auth := range []string{"", "Bearer wrong", "Bearer hlk_a_" + strings.Repeat("a", 52), admin, "Basic " + admin} {
		if resp := get(app.Handler(), auth); resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("Authorization %q: %d, want 401", auth, resp.StatusCode)
		}
	}
	for _, tc := range []struct {
		h    http.Handler
		auth string
	}{{app.Handler(), "Bearer " + admin}, {app.MetricsHandler(), ""}} {
		resp := get(tc.h, tc.auth)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("status %d", resp.StatusCode)
		}
		p := expfmt.NewTextParser(model.UTF8Validation)
		fams, err := p.TextToMetricFamilies(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		for _, name := range []string{"holon_holds_open", "holon_store_size_bytes", "holon_store_commits_total", "holon_calls_closed_at_start", "go_goroutines"} {
			if fams[name] == nil {
				t.Errorf("no %s family", name)
			}
		}
		if size := fams["holon_store_size_bytes"].GetMetric()[0].GetGauge().GetValue(); size <= 0 {
			t.Errorf("holon_store_size_bytes = %v", size)
		}
	}
}
