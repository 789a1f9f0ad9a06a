// Package pg is a holon.Store on PostgreSQL, for several gateways serving
// from one database (`holon serve --store postgres://…`). Its tables are
// those a backup loads into (migrations/0001_tables.sql), so a database
// loaded by `holon restore --to-postgres` is one a gateway serves from;
// the store creates and migrates its schema itself (migrate.go).
//
// Writes are grouped as the embedded store groups them: one writer per
// store handle runs the queued updates in one REPEATABLE READ
// transaction. A group runs fast first, without savepoints; only when
// PostgreSQL refuses one of its statements (a constraint, a value it does
// not take such as text holding a NUL byte) or its COMMIT (a check
// deferred to it), or an update fails after some of its writes reached
// the database, is it rolled back and run again safely, each update under
// its own savepoint and its deferred checks run at its end, so that a
// failing, refused or panicking update is undone alone (Store.SafeRuns
// counts them). The writers of several handles (several gateways) take turns
// under one lock (writer_log's table lock, the transaction's first
// statement, so its snapshot is taken once the lock is held): each group
// sees every group before it and none conflicts with another; what queued
// while a writer waited joins its group. The writer keeps the rows it read
// and wrote in a cache that outlives its groups, and each group logs the
// keys of the rows it changed (writer_log), with the new values of the
// small ones (writer_log.vals, migration 12: balances, budgets, counters,
// sequences, a chain's head, agents' records, and documents of up to
// 512 bytes of text), read by the next writer to take the lock, which
// takes those values and forgets the other rows (cache.go). An update's
// writes are not sent when it ends: they go with the next statement that must be
// answered, or with the group's COMMIT, so that a group whose updates read
// only cached rows costs two round trips (begin, then its writes with the
// commit) however many updates it holds, and one when its writer is alone
// on the database: the COMMIT's round trip then begins the next group too
// (unless another writer took the lock meanwhile: that begin does not
// wait), which the writer gives back at once if no update waits once it is
// answered (group.go). While that COMMIT is in flight, the writer runs
// the updates that come meanwhile, as the next group, on what the
// committing group leaves; they stand if it commits and no other writer
// took the lock in between, else they run again (spec.go),
// and the committed group's callers are answered once the next group's
// COMMIT is sent, so that PostgreSQL does not wait for the writer
// between two groups. A writer that must wait for the lock (another
// gateway's writer holds it) runs its group's updates meanwhile, on what
// it knows; once it holds the lock they stand up to the first that saw a
// row another writer changed meanwhile, and the rows they changed only by
// deltas that the others changed too (balances, counters, agents'
// records, earnings and latency: PostEntry, PostEvent, CounterAt and the
// Add methods) are moved onto the others' values (spec.go, rebase).
// Receipts, approvals, journal entries and call events are numbered from
// blocks each writer takes from the sequences ahead, in transactions of
// their own (numbers.go): no group writes a sequence. Hot rows go once
// per round trip however many updates changed them, a table's rows in one
// statement: balances, budgets, counters and agents' records moved by
// what the updates changed (so that a move keeps what another gateway
// moved; an overdraft, and a budget raised over the limit its update
// declared, are refused by checks at the commit, migrations 18 and 19,
// which name the row, for the writer to forget what it knew of it),
// a chain's head with its new value; the rollups summed in
// one row of arrays, folded into the rollups by the leader of the job
// rollups_fold outside the writers' lock (rows.go, rollups.go, migration
// 15); the holds released are deleted through their
// primary key whatever the plan PostgreSQL cached (rows.go), each once: a
// hold another gateway deleted since the writer read it refuses the
// update (ErrChangedMeanwhile, migration 22), and
// receipts' pages keep room for a receipt's second write (migration 13).
// Reads run in REPEATABLE READ READ ONLY transactions and never wait for
// the writers, except a recent view (holon.RecentViews, recent.go): an
// in-process call's admission reads what the writer last saw committed,
// in memory, when that is recent enough and holds every row it asks for.
//
// That is the design with Options.Turns (HOLON_PG_TURNS=1). By default
// the writers take no turns: each group is a READ COMMITTED transaction
// of its own, the writers' log is read by transaction and names only the
// rows written whole, and a writer's idea of a moved row (a balance,
// budget, counter or record) lacks the other gateways' moves until it
// reads the row again, a second later or when a refusal of its own was
// judged on it (overlap.go); the database judges the sums at every
// commit.
//
// The journal is a forest of hash chains (holon.Chains): each store
// handle's writer extends a chain of its own, claimed when it opens
// (lease.go, journal_chains, migration 17), so that a chain's head is
// never another gateway's to move. Its entries take increasing numbers
// from its blocks, so each chain's rows are in the order of their
// numbers; the numbers skip (holon.VerifyJournal).
//
// Imports: only holon and journal of the project (and pgx). Nothing in
// gateway/, appliance/ or webui/ imports it: they see holon.Store.
package pg
