package main

import (
	"context"
	"io"
	"strings"
	"time"

	"holon.dev/holon"
	"holon.dev/holon/backup"
	"holon.dev/holon/kv"
	"holon.dev/holon/kv/pg"
)

// isPostgresURL reports whether s names a PostgreSQL database.
func isPostgresURL(s string) bool {
	return strings.HasPrefix(s, "postgres://") || strings.HasPrefix(s, "postgresql://")
}

// openStore is how serve opens its store: the embedded one at --db, or the
// PostgreSQL one at --store (--db then only places certificates and files).
func openStore(url string, lease time.Duration) holon.OpenStore {
	if url == "" {
		return kv.OpenStore
	}
	return func(_ string, o holon.StoreOptions) (holon.Store, error) {
		return pg.OpenWith(context.Background(), url, o, pg.Options{Lease: lease})
	}
}

// backupPostgres copies the PostgreSQL store at url, live: one REPEATABLE
// READ transaction while the gateways go on serving.
func backupPostgres(ctx context.Context, url string, w io.Writer, progress func(done, total int64)) (backup.Summary, error) {
	s, err := pg.Open(ctx, url, holon.StoreOptions{})
	if err != nil {
		return backup.Summary{}, err
	}
	defer s.Close()
	return backup.Write(w, backup.PostgresSource(s), backup.Options{Gateway: Version, Progress: progress})
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}
