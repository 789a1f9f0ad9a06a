package pg

import (
	"context"
	"embed"
	"fmt"
	"path"
	"slices"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
)

// migrations are the schema's versions, applied in order: 0001_tables.sql
// is version 1, and so on. A version, once shipped, never changes: a
// change is a new file.
//
//go:embed migrations/*.sql
var migrations embed.FS

// Migration is one version of the schema.
type Migration struct {
	Version int
	Name    string
	SQL     string
}

// Migrations lists the schema's versions, oldest first.
func Migrations() []Migration {
	entries, err := migrations.ReadDir("migrations")
	if err != nil {
		panic(err) // embedded: cannot fail
	}
	var out []Migration
	for _, e := range entries {
		n, _, ok := strings.Cut(e.Name(), "_")
		v, err := strconv.Atoi(n)
		if !ok || err != nil {
			panic("migration file " + e.Name() + " is not named NNNN_name.sql")
		}
		b, err := migrations.ReadFile(path.Join("migrations", e.Name()))
		if err != nil {
			panic(err)
		}
		out = append(out, Migration{Version: v, Name: e.Name(), SQL: string(b)})
	}
	slices.SortFunc(out, func(a, b Migration) int { return a.Version - b.Version })
	for i, m := range out {
		if m.Version != i+1 {
			panic(fmt.Sprintf("migration %s: versions must be 1, 2, … without a gap", m.Name))
		}
	}
	return out
}

// SchemaVersion is the newest version of the schema, the one this binary
// serves from.
func SchemaVersion() int { return len(Migrations()) }

// migrationLock is the advisory lock the gateways take to migrate, so
// that several starting at once apply each version once.
const migrationLock = 0x686f6c6f6e // "holon"

// versionTable records the version a database is at.
const versionTable = `CREATE TABLE IF NOT EXISTS holon_schema (
    version integer PRIMARY KEY,
    applied timestamptz NOT NULL DEFAULT now()
)`

// Version reads the schema version of the database (0 when empty).
func Version(ctx context.Context, q interface {
	QueryRow(context.Context, string, ...any) pgx.Row
}) (int, error) {
	var exists bool
	if err := q.QueryRow(ctx, `SELECT to_regclass('holon_schema') IS NOT NULL`).Scan(&exists); err != nil {
		return 0, err
	}
	if !exists {
		return 0, nil
	}
	var v int
	err := q.QueryRow(ctx, `SELECT coalesce(max(version), 0) FROM holon_schema`).Scan(&v)
	return v, err
}

// ApplyTo applies, in tx, the versions after from up to and including to.
func ApplyTo(ctx context.Context, tx pgx.Tx, from, to int) error {
	if _, err := tx.Exec(ctx, versionTable); err != nil {
		return err
	}
	for _, m := range Migrations() {
		if m.Version <= from || m.Version > to {
			continue
		}
		if _, err := tx.Exec(ctx, m.SQL); err != nil {
			return fmt.Errorf("schema version %d (%s): %w", m.Version, m.Name, err)
		}
		if _, err := tx.Exec(ctx, `INSERT INTO holon_schema (version) VALUES ($1)`, m.Version); err != nil {
			return err
		}
	}
	return nil
}

// Migrate brings the database at conn to the newest schema version, one
// transaction per version, under an advisory lock so that gateways
// starting together apply each version once. A database at a newer
// version than this binary knows is refused.
func Migrate(ctx context.Context, conn *pgx.Conn) (from int, err error) {
	if _, err := conn.Exec(ctx, `SELECT pg_advisory_lock($1)`, migrationLock); err != nil {
		return 0, fmt.Errorf("lock the schema: %w", err)
	}
	defer conn.Exec(context.WithoutCancel(ctx), `SELECT pg_advisory_unlock($1)`, migrationLock)
	from, err = Version(ctx, conn)
	if err != nil {
		return 0, fmt.Errorf("read the schema version: %w", err)
	}
	newest := SchemaVersion()
	if from > newest {
		return from, fmt.Errorf("the database is at schema version %d; this binary knows versions up to %d: upgrade holon", from, newest)
	}
	if from == 0 {
		if err := checkEmpty(ctx, conn); err != nil {
			return 0, err
		}
	}
	for v := from + 1; v <= newest; v++ {
		err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error { return ApplyTo(ctx, tx, v-1, v) })
		if err != nil {
			return from, err
		}
	}
	return from, nil
}

// checkEmpty refuses to create the schema in a database that holds tables
// of something else.
func checkEmpty(ctx context.Context, conn *pgx.Conn) error {
	var held []string
	rows, err := conn.Query(ctx, `SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
		WHERE n.nspname = current_schema() AND c.relkind IN ('r', 'v', 'S') ORDER BY 1 LIMIT 5`)
	if err != nil {
		return err
	}
	held, err = pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return err
	}
	if len(held) > 0 {
		return fmt.Errorf("the database holds tables that are not Holon's (%s) and no holon_schema: use a new database (createdb)", strings.Join(held, ", "))
	}
	return nil
}
