package pg

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// beginView begins a View's transaction: every query of the View sees
// the snapshot its first query takes.
const beginView = `BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY`

// viewTx is a View's transaction (Tx.tx), begun with the View's first
// query, in that query's round trip. That first round trip is the one
// that finds a connection dead (the server restarted since it was last
// used): before any result reached the View, so it is sent again on
// another connection (Store.acquire), and a restart of the server costs
// no View that comes once it is back.
type viewTx struct {
	s    *Store
	conn *pgxpool.Conn
	// err is why the transaction could not begin: every query fails
	// with it.
	err error
}

var _ querier = (*viewTx)(nil)

// SendBatch sends b, after BEGIN when it is the View's first round trip.
func (v *viewTx) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	if v.conn != nil {
		v.s.viewTrips.Add(1)
		return v.conn.SendBatch(ctx, b)
	}
	v.s.viewsBegun.Add(1)
	var br pgx.BatchResults
	conn, err := v.s.acquire(ctx, func(c *pgxpool.Conn) error {
		v.s.viewTrips.Add(1)
		// Fresh queued queries on each attempt: pgx notes on them what
		// it learnt of the statements on the connection it sent them on.
		first := &pgx.Batch{}
		first.Queue(beginView)
		for _, q := range b.QueuedQueries {
			first.Queue(q.SQL, q.Arguments...)
		}
		br = c.SendBatch(ctx, first)
		if _, err := br.Exec(); err != nil {
			br.Close()
			return err
		}
		return nil
	})
	if err != nil {
		v.err = err
		// fn sees no answer of a View that could not begin, as when
		// BEGIN had its own round trip before fn ran: some callers read
		// what fn kept (a row "not found") before the View's error.
		panic(notBegun{err})
	}
	v.conn = conn
	return br
}

// notBegun is the panic that ends fn when its View cannot begin; View
// returns err.
type notBegun struct{ err error }

// Query runs one query, after BEGIN when it is the View's first.
func (v *viewTx) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	if v.conn != nil {
		v.s.viewTrips.Add(1)
		return v.conn.Query(ctx, sql, args...)
	}
	b := &pgx.Batch{}
	b.Queue(sql, args...)
	br := v.SendBatch(ctx, b)
	rows, err := br.Query()
	if err != nil {
		br.Close()
		return rows, err
	}
	return batchRows{Rows: rows, br: br}, nil
}

// QueryRow runs one query for one row, after BEGIN when it is the
// View's first.
func (v *viewTx) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	if v.conn != nil {
		v.s.viewTrips.Add(1)
		return v.conn.QueryRow(ctx, sql, args...)
	}
	b := &pgx.Batch{}
	b.Queue(sql, args...)
	return batchRow{br: v.SendBatch(ctx, b)}
}

// end ends the View's transaction without waiting for it: the ROLLBACK
// and the connection's return to the pool happen meanwhile.
func (v *viewTx) end() {
	conn := v.conn
	if conn == nil {
		return
	}
	v.conn = nil
	v.s.viewTrips.Add(1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		rollback(ctx, conn.Conn()) // failed: the pool drops the connection, still in a transaction
		conn.Release()
	}()
}

// batchRows are the rows of a batch's one query: closing them closes
// the batch.
type batchRows struct {
	pgx.Rows
	br pgx.BatchResults
}

func (r batchRows) Close() {
	r.Rows.Close()
	r.br.Close()
}

// batchRow is the row of a batch's one query.
type batchRow struct{ br pgx.BatchResults }

func (r batchRow) Scan(dst ...any) error {
	err := r.br.QueryRow().Scan(dst...)
	if cerr := r.br.Close(); err == nil {
		err = cerr
	}
	return err
}
