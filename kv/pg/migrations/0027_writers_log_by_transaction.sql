-- Version 27: the writers' log read by transaction, for writers that do
-- not take turns (overlap.go). Each entry records the transaction that
-- wrote it, its writer's chain and when; a writer that begins a group
-- reads, in that statement's snapshot, the keys the other writers logged
-- in transactions committed since its last read (visible in this
-- snapshot, not in the one it read then), whatever order they took their
-- numbers in, and forgets those rows. Entries are pruned some seconds
-- after they were written; a writer that has not read the log for longer
-- forgets all it knew.
ALTER TABLE writer_log ADD COLUMN xid xid8 NOT NULL DEFAULT pg_current_xact_id(),
    ADD COLUMN writer integer,
    ADD COLUMN at timestamptz NOT NULL DEFAULT now();
CREATE INDEX writer_log_xid ON writer_log (xid);
CREATE INDEX writer_log_at ON writer_log (at);
-- Numbers of entries written by writers that do not take turns, far
-- above those numbered under the writers' lock.
CREATE SEQUENCE writer_log_gen START 4611686018427387904;
