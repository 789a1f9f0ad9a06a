package backup

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"holon.dev/holon"
	"holon.dev/holon/journal"
)

// The loader's column check: once a backup is loaded, every table is read
// back, each row turned into the store's record again and encoded as the
// store encodes it, and compared with the backup's row, byte for byte. A
// column loaded from the wrong field, dropped, rounded or reordered is
// refused before anything is committed, whatever the tests happened to
// query.

// rowSum is a row's digest: its bucket's rows are compared by digest, in
// the store's key order, so the check keeps 8 bytes per row, not the rows.
func rowSum(key, value []byte) uint64 {
	h := sha256.New()
	var n [8]byte
	binary.BigEndian.PutUint64(n[:], uint64(len(key)))
	h.Write(n[:])
	h.Write(key)
	h.Write(value)
	return binary.BigEndian.Uint64(h.Sum(nil))
}

// readBack reads one table back as a bucket's rows, in the store's key
// order (byte order of the keys).
type readBack struct {
	sql string
	row func(rows pgx.Rows) (key, value []byte, err error)
}

// readBacks are the tables of pgTables, read back; app_docs is read by
// bucket (readAppDocs).
var readBacks = map[string]readBack{
	// Accounts, records and counters are the sums of their parts (the
	// store's migrations 24 and 25).
	"accounts": {`SELECT name, (sum(balance) * 1000000)::bigint, (sum(held) * 1000000)::bigint FROM accounts GROUP BY name ORDER BY name COLLATE "C"`,
		func(rows pgx.Rows) ([]byte, []byte, error) {
			var name string
			var bal, held int64
			if err := rows.Scan(&name, &bal, &held); err != nil {
				return nil, nil, err
			}
			return encodeRow(name, holon.Account{Balance: journal.Amount(bal), Held: journal.Amount(held)})
		}},
	"agents":   docReadBack("agents", "ref"),
	"mandates": docReadBack("mandates", "id"),
	"budgets": {`SELECT mandate, (spent * 1000000)::bigint, (reserved * 1000000)::bigint FROM budgets ORDER BY mandate COLLATE "C"`,
		func(rows pgx.Rows) ([]byte, []byte, error) {
			var m string
			var spent, reserved int64
			if err := rows.Scan(&m, &spent, &reserved); err != nil {
				return nil, nil, err
			}
			return encodeRow(m, holon.Budget{Spent: journal.Amount(spent), Reserved: journal.Amount(reserved)})
		}},
	"budget_windows": {`SELECT mandate, win, (spent * 1000000)::bigint, (reserved * 1000000)::bigint FROM budget_windows
		ORDER BY convert_to(mandate, 'UTF8') || '\x00'::bytea || convert_to(win, 'UTF8')`,
		func(rows pgx.Rows) ([]byte, []byte, error) {
			var m, w string
			var spent, reserved int64
			if err := rows.Scan(&m, &w, &spent, &reserved); err != nil {
				return nil, nil, err
			}
			return encodeRow(m+"\x00"+w, holon.Budget{Spent: journal.Amount(spent), Reserved: journal.Amount(reserved)})
		}},
	"counters": {`SELECT name, sum(value)::text FROM counters GROUP BY name ORDER BY name COLLATE "C"`,
		func(rows pgx.Rows) ([]byte, []byte, error) {
			var name, v string
			if err := rows.Scan(&name, &v); err != nil {
				return nil, nil, err
			}
			n, err := strconv.ParseUint(v, 10, 64)
			if err != nil {
				return nil, nil, err
			}
			return []byte(name), binary.BigEndian.AppendUint64(nil, n), nil
		}},
	"meta": {`SELECT key, value FROM meta ORDER BY key COLLATE "C"`,
		func(rows pgx.Rows) ([]byte, []byte, error) {
			var k, v string
			if err := rows.Scan(&k, &v); err != nil {
				return nil, nil, err
			}
			if k == "schema" {
				n, err := strconv.ParseUint(v, 10, 64)
				if err != nil {
					return nil, nil, err
				}
				return []byte(k), binary.BigEndian.AppendUint64(nil, n), nil
			}
			return []byte(k), []byte(v), nil
		}},
	"journal": {`SELECT e.seq, e.key, e.time, e.prev, e.hash,
			array_agg(l.account ORDER BY l.position), array_agg((l.amount * 1000000)::bigint ORDER BY l.position)
		FROM journal_entries e JOIN journal_lines l ON l.entry = e.seq GROUP BY e.seq ORDER BY e.seq`,
		func(rows pgx.Rows) ([]byte, []byte, error) {
			var row holon.JournalRow
			var seq int64
			var at string
			var accounts []string
			var amounts []int64
			if err := rows.Scan(&seq, &row.Key, &at, &row.Prev, &row.Hash, &accounts, &amounts); err != nil {
				return nil, nil, err
			}
			row.Seq = uint64(seq)
			var err error
			if row.Time, err = parseTime(at); err != nil {
				return nil, nil, err
			}
			for i := range accounts {
				row.Lines = append(row.Lines, journal.Line{Account: accounts[i], Amount: journal.Amount(amounts[i])})
			}
			return encodeSeqRow(row.Seq, &row)
		}},
	"receipts": {`SELECT id, parent, mandate, caller, agent, status, error, approval, (worst_case * 1000000)::bigint,
			currency, payer, sub_mandate, billed, (cost_own * 1000000)::bigint, (cost_downstream * 1000000)::bigint,
			(cost_total * 1000000)::bigint, splits::text, children, duration_ms, created
		FROM receipts ORDER BY seq`,
		func(rows pgx.Rows) ([]byte, []byte, error) {
			var rc holon.Receipt
			var worst *int64
			var own, down, total int64
			var splits *string
			var created string
			if err := rows.Scan(&rc.ID, &rc.Parent, &rc.Mandate, &rc.Caller, &rc.Agent, &rc.Status, &rc.Error, &rc.Approval, &worst,
				&rc.Currency, &rc.Payer, &rc.SubMandate, &rc.Billed, &own, &down, &total, &splits, &rc.Children, &rc.DurationMS, &created); err != nil {
				return nil, nil, err
			}
			rc.WorstCase = optMicros(worst)
			rc.Cost = holon.Cost{Own: journal.Amount(own), Downstream: journal.Amount(down), Total: journal.Amount(total)}
			if splits != nil {
				if err := json.Unmarshal([]byte(*splits), &rc.Splits); err != nil {
					return nil, nil, fmt.Errorf("receipt %s: splits: %w", rc.ID, err)
				}
			}
			var err error
			if rc.Created, err = parseTime(created); err != nil {
				return nil, nil, err
			}
			seq, _ := holon.ReceiptSeq(rc.ID)
			return encodeSeqRow(seq, &rc)
		}},
	"approvals": {`SELECT id, mandate, caller, agent, capability, input_hash, (max_cost * 1000000)::bigint, (worst_case * 1000000)::bigint,
			currency, receipt, status, created, expires, decided, run, input::text
		FROM approvals ORDER BY seq`,
		func(rows pgx.Rows) ([]byte, []byte, error) {
			var a holon.Approval
			var capability, decided, input *string
			var maxCost *int64
			var worst int64
			var created, expires string
			if err := rows.Scan(&a.ID, &a.Mandate, &a.Caller, &a.Agent, &capability, &a.InputHash, &maxCost, &worst,
				&a.Currency, &a.Receipt, &a.Status, &created, &expires, &decided, &a.Run, &input); err != nil {
				return nil, nil, err
			}
			if capability != nil {
				a.Capability = *capability
			}
			a.MaxCost, a.WorstCase = optMicros(maxCost), journal.Amount(worst)
			if input != nil {
				a.Input = json.RawMessage(*input)
			}
			var err error
			if a.Created, err = parseTime(created); err != nil {
				return nil, nil, err
			}
			if a.Expires, err = parseTime(expires); err != nil {
				return nil, nil, err
			}
			if a.Decided, err = parseOptTime(decided); err != nil {
				return nil, nil, err
			}
			seq, _ := holon.ApprovalSeq(a.ID)
			return encodeSeqRow(seq, &a)
		}},
	"holds": {`SELECT receipt, payer, (amount * 1000000)::bigint, mandate, (reserved * 1000000)::bigint, funder, parent, children,
			(downstream * 1000000)::bigint, sub_mandate, started, budget_window
		FROM holds ORDER BY receipt COLLATE "C"`,
		func(rows pgx.Rows) ([]byte, []byte, error) {
			var h holon.Hold
			var amount, reserved, down int64
			var funder, parent, sub, window *string
			var started string
			if err := rows.Scan(&h.Receipt, &h.Payer, &amount, &h.Mandate, &reserved, &funder, &parent, &h.Children,
				&down, &sub, &started, &window); err != nil {
				return nil, nil, err
			}
			h.Amount, h.Reserved, h.Downstream = journal.Amount(amount), journal.Amount(reserved), journal.Amount(down)
			h.Funder, h.Parent, h.SubMandate, h.Window = deref(funder), deref(parent), deref(sub), deref(window)
			var err error
			if h.Started, err = parseTime(started); err != nil {
				return nil, nil, err
			}
			return encodeRow(h.Receipt, &h)
		}},
	"call_events": {`SELECT seq, receipt, agent, status, error, duration_ms, (billed * 1000000)::bigint, currency, delegated, time
		FROM call_events ORDER BY seq`,
		func(rows pgx.Rows) ([]byte, []byte, error) {
			var ev holon.Event
			var seq, billed int64
			var errText *string
			var at string
			if err := rows.Scan(&seq, &ev.Receipt, &ev.Agent, &ev.Status, &errText, &ev.DurationMS, &billed, &ev.Currency, &ev.Delegated, &at); err != nil {
				return nil, nil, err
			}
			ev.Seq, ev.Error, ev.Billed = uint64(seq), deref(errText), journal.Amount(billed)
			var err error
			if ev.Time, err = parseTime(at); err != nil {
				return nil, nil, err
			}
			return encodeSeqRow(ev.Seq, &ev)
		}},
	"records": {`SELECT agent, sum(runs)::bigint, sum(succeeded)::bigint, (sum(billed) * 1000000)::bigint, sum(duration_ms)::bigint
		FROM agent_records GROUP BY agent ORDER BY agent COLLATE "C"`,
		func(rows pgx.Rows) ([]byte, []byte, error) {
			var agent string
			var rec holon.Record
			var billed int64
			if err := rows.Scan(&agent, &rec.Runs, &rec.Succeeded, &billed, &rec.DurationMS); err != nil {
				return nil, nil, err
			}
			rec.Billed = journal.Amount(billed)
			return encodeRow(agent, rec)
		}},
	holon.BucketCredentials: {`SELECT agent, doc::text FROM credentials ORDER BY agent COLLATE "C"`, keyDocRow},
	holon.BucketSignIn:      {`SELECT key, doc::text FROM signin ORDER BY key COLLATE "C"`, keyDocRow},
}

// keyDocRow is a row kept as its document.
func keyDocRow(rows pgx.Rows) ([]byte, []byte, error) {
	var k, doc string
	err := rows.Scan(&k, &doc)
	return []byte(k), []byte(doc), err
}

func docReadBack(table, key string) readBack {
	return readBack{`SELECT ` + key + `, doc::text, created, published, yanked, revoked FROM ` + table + ` ORDER BY ` + key + ` COLLATE "C"`,
		func(rows pgx.Rows) ([]byte, []byte, error) {
			var k, doc, created string
			var yanked *string
			var d holon.Doc
			if err := rows.Scan(&k, &doc, &created, &d.Published, &yanked, &d.Revoked); err != nil {
				return nil, nil, err
			}
			d.Doc, d.Yanked = json.RawMessage(doc), deref(yanked)
			var err error
			if d.Created, err = parseTime(created); err != nil {
				return nil, nil, err
			}
			return encodeRow(k, d)
		}}
}

// encodeRow is a row under a text key, its value encoded as the store
// encodes it (the store's hand-written encoders write what json.Marshal
// writes).
func encodeRow(key string, v any) ([]byte, []byte, error) {
	b, err := json.Marshal(v)
	return []byte(key), b, err
}

// encodeSeqRow is a row under an 8-byte sequence key.
func encodeSeqRow(seq uint64, v any) ([]byte, []byte, error) {
	b, err := json.Marshal(v)
	return binary.BigEndian.AppendUint64(nil, seq), b, err
}

func parseTime(s string) (time.Time, error) { return time.Parse(time.RFC3339Nano, s) }

func parseOptTime(s *string) (*time.Time, error) {
	if s == nil {
		return nil, nil
	}
	t, err := parseTime(*s)
	return &t, err
}

func optMicros(n *int64) *journal.Amount {
	if n == nil {
		return nil
	}
	a := journal.Amount(*n)
	return &a
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// errReadBack is the loader's refusal of a table that does not read back
// as the backup's rows.
var errReadBack = errors.New("a table does not read back as the backup's rows")

// checkReadBack reads every loaded table back and compares it, row by row,
// with the digests taken as the backup was read.
func (l *pgLoader) checkReadBack() error {
	for bucket, want := range l.sums {
		got := 0
		rb, ok := readBacks[bucket]
		if !ok {
			rb = appDocsReadBack
		}
		var args []any
		if !ok {
			args = []any{bucket}
		}
		rows, err := l.tx.Query(l.ctx, rb.sql, args...)
		if err != nil {
			return fmt.Errorf("read %s back: %w", bucket, err)
		}
		for rows.Next() {
			k, v, err := rb.row(rows)
			if err != nil {
				rows.Close()
				return fmt.Errorf("read %s back: %w", bucket, err)
			}
			if got >= len(want) {
				rows.Close()
				return fmt.Errorf("%w: %s holds %s, which the backup does not", errReadBack, bucket, keyText(k))
			}
			if rowSum(k, v) != want[got] {
				rows.Close()
				return fmt.Errorf("%w: %s %s reads back as %s, not as in the backup (row %d of the table)", errReadBack, bucket, keyText(k), v, got+1)
			}
			got++
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return fmt.Errorf("read %s back: %w", bucket, err)
		}
		if got != len(want) {
			return fmt.Errorf("%w: %s reads back %d rows, the backup has %d", errReadBack, bucket, got, len(want))
		}
	}
	return nil
}

func appDocRow(rows pgx.Rows) ([]byte, []byte, error) {
	var key []byte
	var doc *string
	var raw []byte
	if err := rows.Scan(&key, &doc, &raw); err != nil {
		return nil, nil, err
	}
	if doc != nil {
		return key, []byte(*doc), nil
	}
	return key, raw, nil
}
