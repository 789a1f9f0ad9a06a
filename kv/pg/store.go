package pg

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"holon.dev/holon"
)

// MaxBatch is the most updates one commit holds.
const MaxBatch = 64

// maxAttempts bounds how often a group runs again after conflicts
// (conflict) before its updates fail: for waits given up, about 20 s.
const maxAttempts = 100

// Store is a holon.Store on PostgreSQL.
type Store struct {
	pool *pgxpool.Pool
	now  func() time.Time
	opts holon.StoreOptions

	mu     sync.RWMutex // held for reading while submitting, for writing by Close
	closed bool
	queue  chan *update
	done   chan struct{}

	commits, updates, replays atomic.Uint64
	// lockWaits counts the groups that gave up waiting for a row's lock
	// (lockWait) and ran again.
	lockWaits atomic.Uint64
	// safeRuns counts the groups run again safely, headStarts those begun
	// by the COMMIT of the group before (group.go).
	safeRuns, headStarts atomic.Uint64
	// asReadRuns counts the updates run again on their own because a
	// row they read and wrote whole changed since (guards.go).
	asReadRuns atomic.Uint64
	// refusalChecks counts the refusals of writers that overlap checked
	// against the rows as read (overlap.go: refusedAsRead).
	refusalChecks atomic.Uint64
	// idleStarts counts the groups begun that way and ended unused: no
	// update waited once the COMMIT was answered.
	idleStarts atomic.Uint64
	// trips counts the round trips of the writer's updates (trips.go).
	trips atomic.Uint64
	// stmts counts their statements, savepoints included.
	stmts atomic.Uint64
	// views, viewsBegun and viewTrips count the Views, those that
	// reached the database, and their round trips (trips.go).
	views, viewsBegun, viewTrips atomic.Uint64
	// The writer's time (trips.go), in nanoseconds.
	inGroups, inBegin, inTrips, inCommit atomic.Int64
	maxBatch                             atomic.Int64

	// The writer's cache (cache.go): what committed groups left, valid
	// as of writers' log entry gen (-1: nothing known). Only the writer
	// goroutine touches them.
	base layer
	gen  int64
	// overlap: the writers of several gateways run their groups at once,
	// without the writers' lock (overlap.go); snap is then the snapshot
	// this writer last read the log in, at snapAt, and logged counts its
	// log entries (for pruning).
	overlap bool
	snap    string
	snapAt  time.Time
	logged  uint64
	// othersAt is when the writer last learned of another writer's group
	// (Unix nanoseconds; overlap.go: fresh).
	othersAt atomic.Int64
	// forget are rows a refusal was judged on that the writer did not
	// read afresh, to forget once their group is done (overlap.go).
	forget []string
	// baseMu guards base against recent views (recent.go): the writer
	// takes it to change base, a recent view to read it. baseAt is when
	// base last was the committed state of its rows (zero: not known).
	baseMu                                  sync.RWMutex
	baseAt                                  time.Time
	recentServed, recentStale, recentMissed atomic.Uint64
	// next is a connection whose transaction the last group's COMMIT
	// began, holding the writers' lock, and nextLog the log it read
	// (group.go).
	next    *pgxpool.Conn
	nextLog []logEntry
	nextAt  time.Time
	// spec is the group run while the last COMMIT was in flight, which
	// stands (spec.go); held are the updates of one that was
	// dropped, to run before any queued after them.
	spec                                 *group
	held                                 []*update
	specGroups, specUpdates, specDropped atomic.Uint64
	// The runs while waiting for the writers' lock (spec.go): groups,
	// updates run, updates that stood, rows moved; noWaitRuns turns
	// them off (tests).
	waitGroups, waitUpdates, waitKept, waitMoved atomic.Uint64
	noWaitRuns                                   bool
	// unanswered answers the updates of a committed group once the next
	// group's COMMIT is sent (run).
	unanswered func()
	// pendingHint is about how many writes the last groups queued.
	pendingHint int
	// loseAnswer: see LoseCommitAnswer.
	loseAnswer atomic.Bool
	// memo keeps hot documents decoded (memo.go).
	memo docMemo
	// nums hands out the sequences' numbers (numbers.go).
	nums *numbers

	// The gateway's lease (lease.go).
	id string
	// chain is the journal's chain the writer extends, claimed at start
	// (lease.go); headKey records its head (holon.JournalHeadKey).
	chain                int
	headKey              string
	lease                time.Duration
	stopLease, leaseDone chan struct{}

	// The rollups' fold (rollups.go): how often, how many folds ran.
	foldEvery time.Duration
	folds     atomic.Uint64
	stopFold  context.CancelFunc
	foldDone  chan struct{}
}

var (
	_ holon.Store       = (*Store)(nil)
	_ holon.SharedStore = (*Store)(nil)
	_ holon.Writers     = (*Store)(nil)
	_ holon.SharedTx    = (*Tx)(nil)
)

// Writers is holon.SharedWriters: several gateways write the database,
// their groups serialized by the writers' lock, so that a settlement's
// transaction sees every group committed before it.
func (s *Store) Writers() holon.WriterSet { return holon.SharedWriters }

// update is one queued Update or Apply.
type update struct {
	ctx  context.Context
	fn   func(holon.Tx) error
	done chan error
}

// Open connects to the database at url (postgres://…), creates or
// migrates its schema, takes its lease and starts the store's writer.
func Open(ctx context.Context, url string, opts holon.StoreOptions) (*Store, error) {
	return OpenWith(ctx, url, opts, Options{})
}

// OpenWith is Open with the store's own settings.
func OpenWith(ctx context.Context, url string, opts holon.StoreOptions, o Options) (*Store, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("PostgreSQL address: %w", err)
	}
	if cfg.MaxConns < 4 {
		cfg.MaxConns = 4
	}
	if opts.NoSync {
		cfg.ConnConfig.RuntimeParams["synchronous_commit"] = "off"
	}
	id := newID()
	if cfg.ConnConfig.RuntimeParams["application_name"] == "" {
		// Which gateway a server process serves (pg_stat_activity).
		cfg.ConnConfig.RuntimeParams["application_name"] = "holon " + id
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("connect to PostgreSQL: %w", err)
	}
	conn, err := pool.Acquire(ctx)
	if err != nil {
		pool.Close()
		return nil, fmt.Errorf("connect to PostgreSQL: %w", err)
	}
	_, err = Migrate(ctx, conn.Conn())
	conn.Release()
	if err != nil {
		pool.Close()
		return nil, err
	}
	s := &Store{pool: pool, now: opts.Now, opts: opts, queue: make(chan *update, 4*MaxBatch), done: make(chan struct{}),
		id: id, lease: o.Lease, base: layer{}, gen: -1, stopLease: make(chan struct{}), leaseDone: make(chan struct{})}
	s.nums = newNumbers(s, o)
	if s.overlap = !o.Turns && !TurnsFromEnv(); s.overlap {
		s.noWaitRuns = true // there is no lock to wait for
	}
	if s.now == nil {
		s.now = time.Now
	}
	if s.lease <= 0 {
		s.lease = DefaultLease
	}
	if err := s.renew(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("take the gateway's lease: %w", err)
	}
	if err := s.sameMode(ctx); err != nil {
		pool.Close()
		return nil, err
	}
	if err := s.claimChain(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("claim a chain of the journal: %w", err)
	}
	go s.keepLease()
	go s.write()
	if s.foldEvery = o.FoldEvery; s.foldEvery == 0 {
		s.foldEvery = foldEvery
	}
	if s.foldEvery > 0 {
		var fctx context.Context
		fctx, s.stopFold = context.WithCancel(context.Background())
		s.foldDone = make(chan struct{})
		go s.foldRollups(fctx, s.foldDone)
	}
	if err := s.Update(ctx, initMeta); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// OpenStore opens the store at url: a holon.OpenStore.
func OpenStore(url string, opts holon.StoreOptions) (holon.Store, error) {
	return Open(context.Background(), url, opts)
}

var _ holon.OpenStore = OpenStore

// View runs fn in a read-only transaction that sees one state: one
// REPEATABLE READ READ ONLY transaction, whose snapshot PostgreSQL takes
// at its first query. Its BEGIN is not a round trip of its own: it goes
// with fn's first query (viewTx), so that a View of one read costs one
// round trip, and a View that reads nothing none; its end (ROLLBACK) is
// not waited for. If it cannot begin (the database cannot be reached), fn is stopped at
// that first query, which does not return, and View returns why.
func (s *Store) View(fn func(holon.Tx) error) (err error) {
	s.views.Add(1)
	v := &viewTx{s: s}
	defer v.end()
	defer func() {
		if v.err == nil {
			return
		}
		if r := recover(); r != nil {
			if _, ok := r.(notBegun); !ok {
				panic(r)
			}
		}
		err = unavailable(v.err)
	}()
	tx := &Tx{s: s, ctx: context.Background(), tx: v, readOnly: true, idx: -2, l: layer{}}
	err = fn(tx)
	if tx.fatal != nil {
		return unavailable(tx.fatal)
	}
	return err
}

// Update runs fn in a write transaction and returns once it is committed.
// An update refused because a row it read and wrote whole changed since
// it read it (guards.go) runs again, on the row as it is now.
func (s *Store) Update(ctx context.Context, fn func(holon.Tx) error) error {
	for n := 1; ; n++ {
		err := s.update(ctx, fn)
		var stale *errJudgedStale
		if errors.As(err, &stale) {
			if n < maxAsRead {
				s.asReadRuns.Add(1)
				continue
			}
			return stale.err
		}
		if n == maxAsRead || !runAgain(err) {
			return err
		}
		s.asReadRuns.Add(1)
	}
}

func (s *Store) update(ctx context.Context, fn func(holon.Tx) error) error {
	u := &update{ctx: ctx, fn: fn, done: make(chan error, 1)}
	s.mu.RLock()
	if s.closed {
		s.mu.RUnlock()
		return holon.ErrClosed
	}
	select {
	case s.queue <- u:
	case <-ctx.Done():
		s.mu.RUnlock()
		return ctx.Err()
	}
	s.mu.RUnlock()
	return <-u.done
}

// Apply runs fn as Update does. PostgreSQL's commit is durable when it
// returns, so the Commit it returns has nothing left to wait for.
func (s *Store) Apply(ctx context.Context, fn func(holon.Tx) error) (holon.Commit, error) {
	if err := s.Update(ctx, fn); err != nil {
		return nil, err
	}
	return committed{}, nil
}

type committed struct{}

func (committed) Wait() error { return nil }

// Stats describes the store's write path since it opened.
func (s *Store) Stats() holon.StoreStats {
	st := holon.StoreStats{Commits: s.commits.Load(), Updates: s.updates.Load(), MaxBatch: int(s.maxBatch.Load()), Replays: s.replays.Load()}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	s.pool.QueryRow(ctx, `SELECT pg_database_size(current_database())`).Scan(&st.SizeBytes)
	return st
}

// LockWaits is how many groups gave up waiting for a row another
// transaction held locked (lockWait, writers that overlap) and ran
// again, since the store opened.
func (s *Store) LockWaits() uint64 { return s.lockWaits.Load() }

// SafeRuns is how many groups ran again safely, each update under its
// own savepoint, since the store opened: their fast run was refused
// (group.go).
func (s *Store) SafeRuns() uint64 { return s.safeRuns.Load() }

// AsReadRuns is how many updates ran again on their own since the store
// opened, a row they read and wrote whole having changed since they read
// it, again after their group's safe run (guards.go).
func (s *Store) AsReadRuns() uint64 { return s.asReadRuns.Load() }

// RefusalChecks is how many refusals of this writer's updates were
// checked against the rows they read whole (writers that overlap) since
// the store opened.
func (s *Store) RefusalChecks() uint64 { return s.refusalChecks.Load() }

// HeadStarts is how many groups were begun (transaction, writers' lock,
// log) in the round trip of the COMMIT before them, since the store
// opened: a writer alone on the database does so, and idle how many of
// those it ended unused, no update waiting once the COMMIT was answered.
func (s *Store) HeadStarts() (used, idle uint64) { return s.headStarts.Load(), s.idleStarts.Load() }

// Speculated is how many groups ran while the COMMIT before them was in
// flight and stood, how many updates they held, and how many such runs
// were dropped (spec.go), since the store opened.
func (s *Store) Speculated() (groups, updates, dropped uint64) {
	return s.specGroups.Load(), s.specUpdates.Load(), s.specDropped.Load()
}

// WaitRuns is how many groups ran their updates while their begin waited
// for the writers' lock, how many updates ran so, how many of those stood
// once the lock was held, and how many rows the other writers had
// changed meanwhile were moved onto their values (spec.go), since the
// store opened.
func (s *Store) WaitRuns() (groups, updates, kept, moved uint64) {
	return s.waitGroups.Load(), s.waitUpdates.Load(), s.waitKept.Load(), s.waitMoved.Load()
}

// Close waits for the updates submitted so far and closes the store.
func (s *Store) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	close(s.queue)
	s.mu.Unlock()
	<-s.done
	if s.stopFold != nil {
		s.stopFold()
		<-s.foldDone
	}
	close(s.stopLease)
	<-s.leaseDone
	// Give the lease back: the calls this handle held are closed (the
	// gateway drained them before closing its store).
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	s.nums.close(ctx)
	s.pool.Exec(ctx, `DELETE FROM gateways WHERE id = $1`, s.id)
	s.pool.Exec(ctx, `DELETE FROM job_leaders WHERE gateway = $1`, s.id)
	cancel()
	s.pool.Close()
	return nil
}

// write is the writer: it takes the queued updates in groups and commits
// each group in one transaction.
func (s *Store) write() {
	defer close(s.done)
	defer s.giveBack()
	defer s.answerHeld()
	for {
		if s.spec != nil {
			s.run(s.spec.batch)
			continue
		}
		if len(s.held) > 0 {
			s.run(s.fill(nil))
			continue
		}
		var u *update
		var ok bool
		select {
		case u, ok = <-s.queue:
		default:
			// Nothing waits: a group the last COMMIT began would hold
			// the writers' lock while this writer idles.
			s.giveBack()
			u, ok = <-s.queue
		}
		if !ok {
			return
		}
		s.run([]*update{u})
	}
}

// giveBack ends the group the last COMMIT began (group.go), if it did,
// and returns its connection: its transaction holds the writers' lock and
// wrote nothing, and the log it read is read again by the next group.
func (s *Store) giveBack() {
	if s.next == nil {
		return
	}
	s.idleStarts.Add(1)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	if rollback(ctx, s.next.Conn()) != nil {
		s.next.Conn().Close(ctx)
	}
	cancel()
	s.next.Release()
	s.next, s.nextLog = nil, nil
}

// fill adds to batch the updates held and those queued meanwhile, up to
// MaxBatch.
func (s *Store) fill(batch []*update) []*update {
	n := min(MaxBatch-len(batch), len(s.held))
	batch, s.held = append(batch, s.held[:n]...), s.held[n:]
	for len(batch) < MaxBatch {
		select {
		case u, ok := <-s.queue:
			if !ok {
				return batch
			}
			batch = append(batch, u)
		default:
			return batch
		}
	}
	return batch
}

// run commits one group, the updates in batch and those queued by the
// time the writer has its turn, running it again after a serialization
// conflict, and answers each update.
func (s *Store) run(batch []*update) {
	defer func(start time.Time) { s.inGroups.Add(int64(time.Since(start))) }(time.Now())
	var errs []error
	var err error
	safe := false
	for attempt := 1; ; attempt++ {
		var retry, again bool
		errs, retry, again, err = s.try(&batch, attempt == 1, safe)
		if again {
			safe = true
			s.safeRuns.Add(1)
			continue
		}
		if !retry {
			break
		}
		s.replays.Add(1)
		if lockWaited(err) {
			s.lockWaits.Add(1)
		}
		if attempt == maxAttempts {
			err = fmt.Errorf("PostgreSQL: the group ran %d times, each ended by a conflict with another transaction "+
				"(a serialization failure, a deadlock, or a row locked for over %s): %w", attempt, lockWait, err)
			break
		}
		time.Sleep(time.Duration(attempt) * 100 * time.Microsecond)
	}
	if err == nil {
		s.commits.Add(1)
		s.updates.Add(uint64(len(batch)))
		if n := int64(len(batch)); n > s.maxBatch.Load() {
			s.maxBatch.Store(n)
		}
		if s.opts.OnCommit != nil {
			s.opts.OnCommit(len(batch))
		}
	}
	s.answerHeld() // if no COMMIT was sent since
	answer := func() {
		for i, u := range batch {
			if err != nil {
				u.done <- err
			} else {
				u.done <- errs[i]
			}
		}
	}
	if err == nil && s.spec != nil {
		// The next group ran already (speculate): its COMMIT goes first,
		// and this group's updates are answered once it is sent, so that
		// PostgreSQL does not wait for the answers' work (commit).
		s.unanswered = answer
		return
	}
	answer()
}

// answerHeld answers the updates of the last group, committed, if they
// wait for the next group's COMMIT to be sent.
func (s *Store) answerHeld() {
	if f := s.unanswered; f != nil {
		s.unanswered = nil
		f()
	}
}

// acquire takes a connection from the pool and runs first on it. A
// connection that turns out dead there (the server restarted since it
// was last used: every pooled connection is then dead at once) is
// dropped and another one tried, up to the pool's size, so that a
// restart of the server costs no request that comes once it is back.
// first must be safe to run again: nothing it did survives its failure.
func (s *Store) acquire(ctx context.Context, first func(*pgxpool.Conn) error) (*pgxpool.Conn, error) {
	var err error
	for range s.pool.Config().MaxConns + 1 {
		var conn *pgxpool.Conn
		if conn, err = s.pool.Acquire(ctx); err != nil {
			return nil, err
		}
		if err = first(conn); err == nil {
			return conn, nil
		}
		var pe *pgconn.PgError
		dead := conn.Conn().IsClosed()
		conn.Release()
		if errors.As(err, &pe) && !serverGone(pe.Code) || !dead {
			return nil, err
		}
	}
	return nil, err
}

// call runs fn, its panic turned into its error.
func call(fn func(holon.Tx) error, tx holon.Tx) (err error) {
	defer func() {
		if r := recover(); r != nil {
			if _, far := r.(farRead); far {
				err = errFar // a speculative run's update needed the database (spec.go)
				return
			}
			err = fmt.Errorf("update panicked: %v", r)
		}
	}()
	return fn(tx)
}

// TurnsFromEnv reports whether HOLON_PG_TURNS=1 asks the writers to take
// turns under the writers' lock (Options.Turns).
func TurnsFromEnv() bool { return os.Getenv("HOLON_PG_TURNS") == "1" }

// conflict reports whether err is a serialization conflict, a deadlock,
// a wait for a row's lock given up (lockWait), or the insert of a moved
// row (an account's part, a budget, a counter's part, an agent's
// record's part) that another writer inserted since this one found it
// absent: the transaction may succeed if it runs again.
func conflict(err error) bool {
	var pe *pgconn.PgError
	if !errors.As(err, &pe) {
		return false
	}
	switch pe.Code {
	case "40001", "40P01", lockNotAvailable:
		return true
	case "23505":
		return movedKeys[pe.ConstraintName]
	}
	return false
}

// lockNotAvailable is the error of a statement that waited for a lock
// longer than lock_timeout (or would have waited, with NOWAIT: the
// turns' head start, whose failure only ends the head start).
const lockNotAvailable = "55P03"

// lockWaited reports whether err is a wait for a lock given up.
func lockWaited(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == lockNotAvailable
}

// movedKeys are the primary keys of the tables whose rows are moved
// (rows.go), inserted when a move finds no row.
var movedKeys = map[string]bool{"accounts_pkey": true, "budgets_pkey": true, "budget_windows_pkey": true,
	"counters_pkey": true, "agent_records_pkey": true}

// ErrUnavailable wraps the errors of a database that cannot be reached:
// the gateway answers 503 and tries again later.
var ErrUnavailable = errors.New("PostgreSQL is unavailable")

// unavailableMessage is what a caller is told while the database cannot
// be reached.
const unavailableMessage = "the gateway's database cannot be reached right now: nothing was done; try again in a few seconds"

// unavailable marks a connection-level error as ErrUnavailable, coded
// store_unavailable (503) for the caller; errors PostgreSQL itself
// returned are left as they are, but for those of a server shutting down
// or starting up, which are the same outage.
func unavailable(err error) error {
	if err == nil || errors.Is(err, ErrUnavailable) {
		return err
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) && !serverGone(pe.Code) {
		return err
	}
	return &holon.Error{Code: holon.CodeStoreUnavailable, Msg: unavailableMessage, Err: fmt.Errorf("%w: %w", ErrUnavailable, err)}
}

// serverGone reports whether a PostgreSQL error code says the server is
// going away or not yet back: class 57P (operator intervention: admin,
// crash or immediate shutdown, cannot connect now) and class 08
// (connection exceptions).
func serverGone(code string) bool {
	return strings.HasPrefix(code, "57P") || strings.HasPrefix(code, "08")
}

// Read runs fn in a read-only REPEATABLE READ transaction on the tables
// themselves: one consistent state, for backups.
func (s *Store) Read(ctx context.Context, fn func(pgx.Tx) error) error {
	return pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, fn)
}
