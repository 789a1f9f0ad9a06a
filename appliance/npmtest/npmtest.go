// Package npmtest installs the npm packages a test pins (a package.json
// and its package-lock.json in a testdata directory) so that a plain
// `go test ./...` runs the tests that need them on any machine with Node:
// the packages are installed once per lockfile, with `npm ci`, into the
// user's cache directory (holon/npm/<hash of the lockfile>), and reused.
// Where Node or npm is missing the test is skipped with a message saying
// what to install; under HOLON_TEST_STRICT=1 (as in CI) it fails instead.
package npmtest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Install makes dir's pinned packages available and returns the
// node_modules directory that holds them: dir's own when it has one
// (installed by hand or by .ci/run), else the cache's, which it links
// from dir/node_modules so that scripts in dir find their imports.
func Install(t testing.TB, dir string) string {
	t.Helper()
	dir, err := filepath.Abs(dir)
	if err != nil {
		t.Fatal(err)
	}
	own := filepath.Join(dir, "node_modules")
	if st, err := os.Stat(own); err == nil && st.IsDir() {
		if _, err := os.Stat(filepath.Join(own, ".package-lock.json")); err == nil {
			return own
		}
	}
	npm, err := exec.LookPath("npm")
	if err != nil {
		Missing(t, "npm is not installed (Node 20+ and npm: apt-get install nodejs npm)")
	}
	if _, err := exec.LookPath("node"); err != nil {
		Missing(t, "node is not installed (Node 20+: apt-get install nodejs npm)")
	}
	lock, err := os.ReadFile(filepath.Join(dir, "package-lock.json"))
	if err != nil {
		t.Fatalf("npm packages of %s: %v (a test pins its packages with a lockfile)", dir, err)
	}
	pkg, err := os.ReadFile(filepath.Join(dir, "package.json"))
	if err != nil {
		t.Fatalf("npm packages of %s: %v", dir, err)
	}
	sum := sha256.Sum256(append(append(pkg, 0), lock...))
	cache, err := os.UserCacheDir()
	if err != nil {
		Missing(t, fmt.Sprintf("no cache directory for npm packages: %v", err))
	}
	root := filepath.Join(cache, "holon", "npm", hex.EncodeToString(sum[:8]))
	modules := filepath.Join(root, "node_modules")
	if err := install(npm, root, pkg, lock); err != nil {
		Missing(t, fmt.Sprintf("npm ci of %s's pinned packages into %s failed: %v", dir, root, err))
	}
	// Scripts in dir import from dir/node_modules: link it to the cache.
	if _, err := os.Lstat(own); os.IsNotExist(err) {
		if err := os.Symlink(modules, own); err != nil && !os.IsExist(err) {
			t.Fatalf("link %s to the installed packages: %v", own, err)
		}
	}
	return modules
}

// install runs npm ci in root once: processes of several test packages
// take turns on a lock file, and the first one installs.
func install(npm, root string, pkg, lock []byte) error {
	if err := os.MkdirAll(root, 0o755); err != nil {
		return err
	}
	done := filepath.Join(root, "node_modules", ".holon-installed")
	if _, err := os.Stat(done); err == nil {
		return nil
	}
	lf, err := os.OpenFile(filepath.Join(root, ".lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return err
	}
	defer lf.Close()
	if err := syscall.Flock(int(lf.Fd()), syscall.LOCK_EX); err != nil {
		return err
	}
	defer syscall.Flock(int(lf.Fd()), syscall.LOCK_UN)
	if _, err := os.Stat(done); err == nil {
		return nil
	}
	if err := os.WriteFile(filepath.Join(root, "package.json"), pkg, 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(root, "package-lock.json"), lock, 0o644); err != nil {
		return err
	}
	var last error
	for attempt := range 3 {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		cmd := exec.CommandContext(ctx, npm, "ci", "--no-audit", "--no-fund", "--loglevel=error")
		cmd.Dir = root
		out, err := cmd.CombinedOutput()
		cancel()
		if err == nil {
			return os.WriteFile(done, nil, 0o644)
		}
		last = fmt.Errorf("%v: %s", err, strings.TrimSpace(string(out)))
		time.Sleep(time.Duration(attempt+1) * 2 * time.Second)
	}
	return last
}

// Missing skips the test saying what is missing, or fails it under
// HOLON_TEST_STRICT=1.
func Missing(t testing.TB, what string) {
	t.Helper()
	if strings.TrimSpace(os.Getenv("HOLON_TEST_STRICT")) == "1" {
		t.Fatal(what + " (HOLON_TEST_STRICT=1: failing instead of skipping)")
	}
	t.Skip(what + " (skipped; HOLON_TEST_STRICT=1 makes this fail)")
}
