// Package pgtest starts a throwaway PostgreSQL server for tests: initdb in a
// temporary directory, pg_ctl start on a free loopback port, stopped and
// removed at cleanup. As root it runs the server as the postgres user.
//
// When no PostgreSQL server is installed the test is skipped, with a
// message saying what to install; with HOLON_TEST_STRICT=1 (as in CI) it
// fails instead.
package pgtest

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// Install is what to run to get a server on Debian.
const Install = "apt-get update && apt-get install -y --no-install-recommends postgresql"

// Server is a running throwaway PostgreSQL.
type Server struct {
	bin  string
	dir  string
	port int
	cred *syscall.Credential
}

// Start starts a server for the test and stops it at cleanup.
func Start(tb testing.TB) *Server {
	tb.Helper()
	bin, err := findBin()
	if err != nil {
		unavailable(tb, err.Error())
	}
	s := &Server{bin: bin}
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			unavailable(tb, "running as root and there is no postgres user to run the server as: "+err.Error())
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		s.cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
	}
	// A short path: the server's socket lives in it.
	s.dir, err = os.MkdirTemp("", "holon-pg-")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { os.RemoveAll(s.dir) })
	if s.cred != nil {
		if err := os.Chown(s.dir, int(s.cred.Uid), int(s.cred.Gid)); err != nil {
			tb.Fatal(err)
		}
	}
	data := filepath.Join(s.dir, "data")
	if out, err := s.run("initdb", "-D", data, "-A", "trust", "-U", "postgres", "-E", "UTF8", "--locale=C", "--no-sync"); err != nil {
		tb.Fatalf("initdb: %v\n%s", err, out)
	}
	var lastErr error
	for range 3 {
		if s.port, err = freePort(); err != nil {
			tb.Fatal(err)
		}
		opts := fmt.Sprintf("-c listen_addresses=127.0.0.1 -p %d -k %s -c fsync=off -c synchronous_commit=off -c full_page_writes=off", s.port, s.dir)
		out, err := s.run("pg_ctl", "-D", data, "-l", filepath.Join(s.dir, "log"), "-o", opts, "-w", "-t", "60", "start")
		if err == nil {
			lastErr = nil
			break
		}
		log, _ := os.ReadFile(filepath.Join(s.dir, "log"))
		lastErr = fmt.Errorf("pg_ctl start: %v\n%s\n%s", err, out, log)
	}
	if lastErr != nil {
		tb.Fatal(lastErr)
	}
	tb.Cleanup(func() {
		if out, err := s.run("pg_ctl", "-D", data, "-m", "immediate", "-w", "stop"); err != nil {
			tb.Errorf("pg_ctl stop: %v\n%s", err, out)
		}
	})
	return s
}

// URL is the connection string of a database on the server.
func (s *Server) URL(db string) string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s?sslmode=disable", s.port, db)
}

// CreateDB creates an empty database and returns its URL.
func (s *Server) CreateDB(tb testing.TB, name string) string {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, s.URL("postgres"))
	if err != nil {
		tb.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		tb.Fatal(err)
	}
	return s.URL(name)
}

// Connect opens a connection to a database, closed at cleanup.
func (s *Server) Connect(tb testing.TB, url string) *pgx.Conn {
	tb.Helper()
	conn, err := pgx.Connect(context.Background(), url)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

func (s *Server) run(name string, args ...string) ([]byte, error) {
	cmd := exec.Command(filepath.Join(s.bin, name), args...)
	cmd.Dir = s.dir
	cmd.Env = append(os.Environ(), "LC_ALL=C")
	if s.cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: s.cred}
	}
	return cmd.CombinedOutput()
}

// findBin finds the directory of initdb and pg_ctl: Debian keeps them in
// /usr/lib/postgresql/<version>/bin, out of PATH.
func findBin() (string, error) {
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool { return version(dirs[i]) > version(dirs[j]) })
	if p, err := exec.LookPath("initdb"); err == nil {
		dirs = append(dirs, filepath.Dir(p))
	}
	for _, d := range dirs {
		if isExec(filepath.Join(d, "initdb")) && isExec(filepath.Join(d, "pg_ctl")) {
			return d, nil
		}
	}
	return "", fmt.Errorf("no PostgreSQL server (initdb, pg_ctl) found in /usr/lib/postgresql/*/bin or PATH")
}

func version(dir string) int {
	n, _ := strconv.Atoi(filepath.Base(filepath.Dir(dir)))
	return n
}

func isExec(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0
}

func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

func unavailable(tb testing.TB, why string) {
	tb.Helper()
	msg := fmt.Sprintf("PostgreSQL is needed: %s; install it with: %s", why, Install)
	if strings.TrimSpace(os.Getenv("HOLON_TEST_STRICT")) == "1" {
		tb.Fatal(msg + " (HOLON_TEST_STRICT=1: failing instead of skipping)")
	}
	tb.Skip(msg + " (skipped; HOLON_TEST_STRICT=1 makes this fail)")
}
