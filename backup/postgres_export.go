package backup

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"

	"github.com/jackc/pgx/v5"

	"holon.dev/holon/kv"
	"holon.dev/holon/kv/pg"
)

// Source is a store a backup is written from: kv's store, or the
// PostgreSQL store through PostgresSource. Export streams every row of
// every bucket as the embedded store holds it, in bucket then key order,
// as of one moment.
type Source interface {
	Export(begin func(kv.Snapshot) error, row func(bucket string, key, value []byte) error) error
}

var _ Source = (*kv.Store)(nil)

// PostgresSource is the PostgreSQL store as a backup's source: its tables
// read back as the embedded store's rows (the same bytes, so a backup of
// either store reads the same and restores into either), from one
// REPEATABLE READ transaction while the gateways go on.
func PostgresSource(s *pg.Store) Source { return postgresSource{s} }

type postgresSource struct{ s *pg.Store }

// derivedReadBacks are kv's indexes, rebuilt from the tables they index.
var derivedReadBacks = map[string]readBack{
	"journal_keys": {`SELECT key, seq FROM journal_entries ORDER BY key COLLATE "C"`,
		func(rows pgx.Rows) ([]byte, []byte, error) {
			var key string
			var seq int64
			err := rows.Scan(&key, &seq)
			return []byte(key), binary.BigEndian.AppendUint64(nil, uint64(seq)), err
		}},
	"receipts_by_mandate": {`SELECT mandate, seq FROM receipts ORDER BY mandate COLLATE "C", seq`,
		func(rows pgx.Rows) ([]byte, []byte, error) {
			var m string
			var seq int64
			err := rows.Scan(&m, &seq)
			k := binary.BigEndian.AppendUint64(append([]byte(m), 0), uint64(seq))
			return k, []byte{}, err
		}},
}

// countQueries count a bucket's rows; any other bucket is in app_docs.
// An account, a record, a counter and a version's earnings or latency are
// one row however many parts the store keeps them in.
var countQueries = map[string]string{
	"accounts": `(SELECT DISTINCT name FROM accounts) a`, "agents": `agents`, "approvals": `approvals`, "budgets": `budgets`,
	"budget_windows": `budget_windows`,
	"call_events":    `call_events`, "counters": `(SELECT DISTINCT name FROM counters) c`, "credentials": `credentials`, "holds": `holds`,
	"journal": `journal_entries`, "journal_keys": `journal_entries`, "mandates": `mandates`, "meta": `meta`,
	"receipts": `receipts`, "receipts_by_mandate": `receipts`, "records": `(SELECT DISTINCT agent FROM agent_records) r`, "signin": `signin`,
	"earnings": `(SELECT DISTINCT split_part(key, ' ', 1) FROM app_docs WHERE bucket = 'earnings') e`,
	"latency":  `(SELECT DISTINCT split_part(key, ' ', 1) FROM app_docs WHERE bucket = 'latency') l`,
}

func (p postgresSource) Export(begin func(kv.Snapshot) error, row func(bucket string, key, value []byte) error) error {
	ctx := context.Background()
	return p.s.Read(ctx, func(tx pgx.Tx) error {
		snap := kv.Snapshot{}
		var schema string
		if err := tx.QueryRow(ctx, `SELECT coalesce((SELECT value FROM meta WHERE key = 'schema'), '0')`).Scan(&schema); err != nil {
			return err
		}
		snap.Schema, _ = strconv.ParseUint(schema, 10, 64)
		seqs := map[string]uint64{}
		docs := map[string]int64{}
		rows, err := tx.Query(ctx, `SELECT bucket, value::text FROM sequences`)
		if err != nil {
			return err
		}
		for rows.Next() {
			var b, v string
			if err := rows.Scan(&b, &v); err != nil {
				return err
			}
			seqs[b], _ = strconv.ParseUint(v, 10, 64)
		}
		if rows.Err() != nil {
			return rows.Err()
		}
		rows, err = tx.Query(ctx, `SELECT bucket, count(*) FROM app_docs GROUP BY bucket`)
		if err != nil {
			return err
		}
		for rows.Next() {
			var b string
			var n int64
			if err := rows.Scan(&b, &n); err != nil {
				return err
			}
			docs[b] = n
		}
		if rows.Err() != nil {
			return rows.Err()
		}
		names := kv.BucketNames()
		for b := range docs {
			if !slices.Contains(names, b) {
				names = append(names, b)
			}
		}
		slices.Sort(names)
		for _, name := range names {
			n := docs[name]
			if table, ok := countQueries[name]; ok {
				if err := tx.QueryRow(ctx, `SELECT count(*) FROM `+table).Scan(&n); err != nil {
					return err
				}
			}
			snap.Buckets = append(snap.Buckets, kv.BucketInfo{Name: name, Rows: n, Sequence: seqs[name]})
		}
		if err := begin(snap); err != nil {
			return err
		}
		for _, b := range snap.Buckets {
			rb, ok := readBacks[b.Name]
			if d, derived := derivedReadBacks[b.Name]; derived {
				rb, ok = d, true
			}
			var args []any
			if !ok {
				rb, args = appDocsReadBack, []any{b.Name}
			}
			out := func(k, v []byte) error { return row(b.Name, k, v) }
			emit := out
			var parts *pg.Parts
			if sum, inParts := partSums[b.Name]; inParts {
				parts = pg.NewParts(func(ref string, first []byte, docs [][]byte) error {
					if len(docs) == 1 && string(first) == ref {
						return out(first, docs[0]) // part 0 alone, as stored
					}
					v, err := sum(docs)
					if err != nil {
						return fmt.Errorf("%s %s: %w", b.Name, ref, err)
					}
					return out([]byte(ref), v)
				})
				emit = parts.Add
			}
			if err := streamRows(ctx, tx, rb, args, emit); err != nil {
				return err
			}
			if parts != nil {
				if err := parts.Flush(); err != nil {
					return err
				}
			}
		}
		return nil
	})
}

// partSums add the parts of a version's earnings or latency (the store
// keeps one part per gateway: pg.PartKey) into the document the embedded
// store holds, json.Marshal's bytes.
var partSums = map[string]func(parts [][]byte) ([]byte, error){
	"earnings": func(parts [][]byte) ([]byte, error) {
		e, err := pg.SumEarnings(parts)
		if err != nil {
			return nil, err
		}
		return json.Marshal(e)
	},
	"latency": func(parts [][]byte) ([]byte, error) {
		l, err := pg.SumLatency(parts)
		if err != nil {
			return nil, err
		}
		return json.Marshal(l)
	},
}

// appDocsReadBack reads one bucket of app_docs.
var appDocsReadBack = readBack{`SELECT key_bytes, doc::text, raw FROM app_docs WHERE bucket = $1 ORDER BY key_bytes`, appDocRow}

// streamRows runs a read-back query and hands each row over as it comes.
func streamRows(ctx context.Context, tx pgx.Tx, rb readBack, args []any, fn func(k, v []byte) error) error {
	rows, err := tx.Query(ctx, rb.sql, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		k, v, err := rb.row(rows)
		if err != nil {
			return err
		}
		if err := fn(k, v); err != nil {
			return err
		}
	}
	return rows.Err()
}
