// Package pg is a holon.Store on PostgreSQL, for several gateways serving
// from one database (`holon serve --store postgres://…`). Its tables are
// those a backup loads into (migrations/0001_tables.sql), so a database
// loaded by `holon restore --to-postgres` is one a gateway serves from;
// the store creates and migrates its schema itself (migrate.go).
//
// Writes are grouped as the embedded store groups them: one writer per
// store handle runs the queued updates in one SERIALIZABLE transaction,
// each under its own savepoint, so that a failing or panicking update is
// undone alone. The writers of several handles (several gateways) take
// turns under one advisory lock, taken before the transaction begins, so
// each group sees every group before it and none conflicts with another;
// what queued while a writer waited joins its group. A group that still
// loses a serialization conflict runs again whole. Reads run in
// REPEATABLE READ READ ONLY transactions and never wait for the writers.
//
// Imports: only holon and journal of the project (and pgx). Nothing in
// gateway/, appliance/ or webui/ imports it: they see holon.Store.
package pg
