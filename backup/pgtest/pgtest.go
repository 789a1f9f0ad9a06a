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
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"holon.dev/holon/backup/pgserver"
)

// Install is what to run to get a server on Debian.
const Install = pgserver.Install

// Server is a running throwaway PostgreSQL.
type Server struct{ *pgserver.Server }

// Start starts a server for the test and stops it at cleanup. It does not
// make commits durable (fsync and synchronous_commit off): a test that
// stops it with Crash and wants its commits back uses StartCrashable.
func Start(tb testing.TB) *Server {
	tb.Helper()
	return StartWith(tb, pgserver.Options{})
}

// StartCrashable is Start for tests that stop the server as a crash would
// (Crash, then Restart): every commit reaches the server's log before it
// is acknowledged (synchronous_commit on), so that an immediate stop loses
// none. fsync stays off: the machine itself does not crash.
func StartCrashable(tb testing.TB) *Server {
	tb.Helper()
	return StartWith(tb, pgserver.Options{Settings: []string{"synchronous_commit=on"}})
}

// StartWith is Start with the server's options.
func StartWith(tb testing.TB, opts pgserver.Options) *Server {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s, err := pgserver.Start(ctx, opts)
	if errors.Is(err, pgserver.ErrNotInstalled) {
		unavailable(tb, err.Error())
	}
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		if err := s.Stop(); err != nil {
			tb.Error(err)
		}
	})
	return &Server{s}
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

func unavailable(tb testing.TB, why string) {
	tb.Helper()
	msg := fmt.Sprintf("PostgreSQL is needed: %s; install it with: %s", why, Install)
	if strings.TrimSpace(os.Getenv("HOLON_TEST_STRICT")) == "1" {
		tb.Fatal(msg + " (HOLON_TEST_STRICT=1: failing instead of skipping)")
	}
	tb.Skip(msg + " (skipped; HOLON_TEST_STRICT=1 makes this fail)")
}
