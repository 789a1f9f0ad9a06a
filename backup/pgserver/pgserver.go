// Package pgserver starts a throwaway PostgreSQL server: initdb in a
// temporary directory, pg_ctl start on a free loopback port, stopped and
// removed by Stop. As root it runs the server as the postgres user. The
// tests (backup/pgtest) and `holon bench` share it.
package pgserver

import (
	"context"
	"errors"
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
)

// Install is what to run to get a server on Debian.
const Install = "apt-get update && apt-get install -y --no-install-recommends postgresql"

// ErrNotInstalled says no PostgreSQL server can be run here.
var ErrNotInstalled = errors.New("no PostgreSQL server")

// Options shape the server.
type Options struct {
	// Durable keeps PostgreSQL's durable defaults (fsync,
	// synchronous_commit, full_page_writes), as production runs; without
	// it they are off, for tests.
	Durable bool
	// Settings are further -c name=value settings.
	Settings []string
}

// Server is a running throwaway PostgreSQL.
type Server struct {
	bin, dir string
	port     int
	cred     *syscall.Credential
	// options are pg_ctl's -o, for Restart.
	options string
}

// Start initialises and starts a server. The error wraps ErrNotInstalled
// when there is no server to run.
func Start(ctx context.Context, opts Options) (*Server, error) {
	bin, err := findBin()
	if err != nil {
		return nil, err
	}
	s := &Server{bin: bin}
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			return nil, fmt.Errorf("%w: running as root and there is no postgres user to run the server as: %v", ErrNotInstalled, err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		s.cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
	}
	// A short path: the server's socket lives in it.
	if s.dir, err = os.MkdirTemp("", "holon-pg-"); err != nil {
		return nil, err
	}
	if s.cred != nil {
		if err := os.Chown(s.dir, int(s.cred.Uid), int(s.cred.Gid)); err != nil {
			os.RemoveAll(s.dir)
			return nil, err
		}
	}
	data := filepath.Join(s.dir, "data")
	if out, err := s.run(ctx, "initdb", "-D", data, "-A", "trust", "-U", "postgres", "-E", "UTF8", "--locale=C", "--no-sync"); err != nil {
		os.RemoveAll(s.dir)
		return nil, fmt.Errorf("initdb: %v\n%s", err, out)
	}
	var lastErr error
	for range 3 {
		if s.port, err = freePort(); err != nil {
			os.RemoveAll(s.dir)
			return nil, err
		}
		o := fmt.Sprintf("-c listen_addresses=127.0.0.1 -p %d -k %s", s.port, s.dir)
		if !opts.Durable {
			o += " -c fsync=off -c synchronous_commit=off -c full_page_writes=off"
		}
		for _, set := range opts.Settings {
			o += " -c " + set
		}
		out, err := s.run(ctx, "pg_ctl", "-D", data, "-l", filepath.Join(s.dir, "log"), "-o", o, "-w", "-t", "60", "start")
		if err == nil {
			s.options = o
			return s, nil
		}
		log, _ := os.ReadFile(filepath.Join(s.dir, "log"))
		lastErr = fmt.Errorf("pg_ctl start: %v\n%s\n%s", err, out, log)
	}
	os.RemoveAll(s.dir)
	return nil, lastErr
}

// PID is the server's postmaster process: its backends are its children.
func (s *Server) PID() (int, error) {
	b, err := os.ReadFile(filepath.Join(s.dir, "data", "postmaster.pid"))
	if err != nil {
		return 0, err
	}
	line, _, _ := strings.Cut(string(b), "\n")
	return strconv.Atoi(strings.TrimSpace(line))
}

// Log is what the server wrote to its log since it first started, across
// restarts.
func (s *Server) Log() ([]byte, error) { return os.ReadFile(filepath.Join(s.dir, "log")) }

// URL is the connection string of a database on the server.
func (s *Server) URL(db string) string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s?sslmode=disable", s.port, db)
}

// Stop stops the server at once and removes its files.
func (s *Server) Stop() error {
	out, err := s.run(context.Background(), "pg_ctl", "-D", filepath.Join(s.dir, "data"), "-m", "immediate", "-w", "stop")
	os.RemoveAll(s.dir)
	if err != nil {
		return fmt.Errorf("pg_ctl stop: %v\n%s", err, out)
	}
	return nil
}

// Crash stops the server at once (pg_ctl stop -m immediate: every
// connection cut, no checkpoint, as a crash of the server would), keeping
// its files for Restart.
func (s *Server) Crash() error {
	out, err := s.run(context.Background(), "pg_ctl", "-D", filepath.Join(s.dir, "data"), "-m", "immediate", "-w", "stop")
	if err != nil {
		return fmt.Errorf("pg_ctl stop -m immediate: %v\n%s", err, out)
	}
	return nil
}

// Restart starts a crashed server again, on the same port and files: it
// recovers from its write-ahead log as after a crash.
func (s *Server) Restart(ctx context.Context) error {
	data := filepath.Join(s.dir, "data")
	out, err := s.run(ctx, "pg_ctl", "-D", data, "-l", filepath.Join(s.dir, "log"), "-o", s.options, "-w", "-t", "60", "start")
	if err != nil {
		log, _ := os.ReadFile(filepath.Join(s.dir, "log"))
		return fmt.Errorf("pg_ctl start: %v\n%s\n%s", err, out, tail(string(log), 2000))
	}
	return nil
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[len(s)-n:]
}

func (s *Server) run(ctx context.Context, name string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, filepath.Join(s.bin, name), args...)
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
	version := func(dir string) int {
		n, _ := strconv.Atoi(filepath.Base(filepath.Dir(dir)))
		return n
	}
	sort.Slice(dirs, func(i, j int) bool { return version(dirs[i]) > version(dirs[j]) })
	if p, err := exec.LookPath("initdb"); err == nil {
		dirs = append(dirs, filepath.Dir(p))
	}
	for _, d := range dirs {
		if isExec(filepath.Join(d, "initdb")) && isExec(filepath.Join(d, "pg_ctl")) {
			return d, nil
		}
	}
	return "", fmt.Errorf("%w (initdb, pg_ctl) found in /usr/lib/postgresql/*/bin or PATH", ErrNotInstalled)
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
