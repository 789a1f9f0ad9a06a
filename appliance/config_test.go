package appliance_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"holon.dev/holon/appliance"
	"holon.dev/holon/backup"
	"holon.dev/holon/kv"
)

// productionEnv is a complete production environment.
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

// openWithEnv configures an appliance from env as holon serve does and
// opens it.
func openWithEnv(t *testing.T, env map[string]string, hosted bool, db string) (*appliance.App, error) {
	t.Helper()
	cfg := appliance.Config{OpenStore: kv.OpenStore, Backup: backup.StoreHandler, DB: db, Hosted: hosted, NoSync: true}
	if err := appliance.ConfigFromEnv(func(k string) string { return env[k] }, &cfg); err != nil {
		return nil, err
	}
	return appliance.Open(context.Background(), cfg)
}

// Ensure that in production the gateway refuses to start without each
// required setting, or with a weak one, naming it; that GitHub settings
// are never required; and that with everything set it starts and serves.
func TestConfig_Production(t *testing.T) {
	notADir := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(notADir, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		change map[string]string // "" deletes the variable
		hosted bool
		db     string
		want   string
	}{
		{"no public url", map[string]string{"HOLON_PUBLIC_URL": ""}, true, "", "HOLON_PUBLIC_URL"},
		{"public url not https", map[string]string{"HOLON_PUBLIC_URL": "http://gw.example.com"}, true, "", "HOLON_PUBLIC_URL"},
		{"no site url", map[string]string{"HOLON_SITE_URL": ""}, true, "", "HOLON_SITE_URL"},
		{"site url not a url", map[string]string{"HOLON_SITE_URL": "example.com"}, true, "", "HOLON_SITE_URL"},
		{"no file secret", map[string]string{"HOLON_FILE_SECRET": ""}, true, "", "HOLON_FILE_SECRET"},
		{"short file secret", map[string]string{"HOLON_FILE_SECRET": "s3cret"}, true, "", "HOLON_FILE_SECRET"},
		{"no admin key", map[string]string{"HOLON_ADMIN_KEY": ""}, true, "", "HOLON_ADMIN_KEY"},
		{"admin key not random", map[string]string{"HOLON_ADMIN_KEY": strings.Repeat("ab", 20)}, true, "", "HOLON_ADMIN_KEY"},
		{"admin key is the file secret", map[string]string{"HOLON_ADMIN_KEY": productionEnv()["HOLON_FILE_SECRET"]}, true, "", "HOLON_ADMIN_KEY"},
		{"no trust proxy", map[string]string{"HOLON_TRUST_PROXY": ""}, true, "", "HOLON_TRUST_PROXY"},
		{"trust proxy not 0 or 1", map[string]string{"HOLON_TRUST_PROXY": "yes"}, true, "", "HOLON_TRUST_PROXY"},
		{"private endpoints", map[string]string{"HOLON_ALLOW_PRIVATE_ENDPOINTS": "1"}, true, "", "HOLON_ALLOW_PRIVATE_ENDPOINTS"},
		{"db not writable", nil, true, filepath.Join(notADir, "holon.db"), "--db"},
		{"not hosted", nil, false, "", "--hosted"},
		{"unknown environment", map[string]string{"HOLON_ENV": "prod"}, true, "", "HOLON_ENV"},
	} {
		env := productionEnv()
		for k, v := range tc.change {
			if v == "" {
				delete(env, k)
			} else {
				env[k] = v
			}
		}
		db := tc.db
		if db == "" {
			db = filepath.Join(t.TempDir(), "holon.db")
		}
		app, err := openWithEnv(t, env, tc.hosted, db)
		if err == nil {
			app.Close()
			t.Errorf("%s: the gateway started", tc.name)
			continue
		}
		if !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v; want a message naming %s", tc.name, err, tc.want)
		}
		if _, statErr := os.Stat(db); statErr == nil {
			t.Errorf("%s: the store was created before the checks", tc.name)
		}
	}

	// Everything missing: every setting is named, one per line.
	_, err := openWithEnv(t, map[string]string{"HOLON_ENV": "production"}, true, filepath.Join(t.TempDir(), "holon.db"))
	for _, name := range []string{"HOLON_PUBLIC_URL", "HOLON_SITE_URL", "HOLON_FILE_SECRET", "HOLON_ADMIN_KEY", "HOLON_TRUST_PROXY"} {
		if err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("with nothing set, the error %v does not name %s", err, name)
		}
	}

	// Everything set, GitHub not configured: it starts and serves.
	app, err := openWithEnv(t, productionEnv(), true, filepath.Join(t.TempDir(), "holon.db"))
	if err != nil {
		t.Fatalf("a complete production configuration: %v", err)
	}
	defer app.Close()
	srv := httptest.NewServer(app.Handler())
	defer srv.Close()
	resp, err := http.Post(srv.URL+"/v0/signup", "application/json", strings.NewReader(`{"handle":"ann","email":"ann@example.com"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		t.Errorf("signup on the production gateway: %d", resp.StatusCode)
	}
}

// Ensure that outside production a hosted gateway starts with no settings
// at all, and malformed values are still refused.
func TestConfig_Development(t *testing.T) {
	app, err := openWithEnv(t, map[string]string{}, true, filepath.Join(t.TempDir(), "holon.db"))
	if err != nil {
		t.Fatalf("a hosted dev gateway without settings: %v", err)
	}
	app.Close()
	for name, env := range map[string]map[string]string{
		"HOLON_RATE_ACCOUNT":  {"HOLON_RATE_ACCOUNT": "lots"},
		"HOLON_FX":            {"HOLON_FX": "USD:0.9"},
		"HOLON_SIGNUP_CREDIT": {"HOLON_SIGNUP_CREDIT": "-5"},
		"HOLON_PUBLIC_URL":    {"HOLON_PUBLIC_URL": "ftp://x"},
		"HOLON_PRIVATE_EVALS": {"HOLON_PRIVATE_EVALS": filepath.Join(t.TempDir(), "missing")},
		"HOLON_RECORDS":       {"HOLON_RECORDS": "yes please"},
	} {
		if _, err := openWithEnv(t, env, true, filepath.Join(t.TempDir(), "holon.db")); err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("%v: %v, want an error naming %s", env, err, name)
		}
	}
	l, err := appliance.ParseLimit("600/min")
	if err != nil || l.Burst != 600 || float64(l.Rate) != 10 {
		t.Errorf("ParseLimit(600/min) = %+v, %v", l, err)
	}
}
