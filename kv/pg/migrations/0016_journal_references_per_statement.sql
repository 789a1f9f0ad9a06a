-- Version 16: a journal line's entry is checked once per statement, not
-- once per line; receipts without a parent leave the parent index alone.
--
-- Until this version each line's deferred foreign key to its entry ran a
-- query at commit: three a settled call, 5.7-6.7 µs of the writers'
-- server time a call (pg_stat_statements during `holon bench` rows [10]
-- and [11]), spent while a group holds the writers' lock. The rule is
-- the same, checked when the lines' statement ends, by
-- holon_journal_lines_balanced (which already checks their balance
-- there), in one query for all the statement's lines: a line's entry
-- exists. So an entry is written before its lines (the store does;
-- version 14 also let lines come first, checked at the commit). Entries
-- are append-only: an entry, once there, stays. A line's account keeps
-- its foreign key, which also keeps an account with lines from being
-- deleted.
--
-- A receipt's parent is indexed only when it has one: most receipts are
-- a caller's own calls, with none, and nothing looks receipts up by a
-- missing parent.
ALTER TABLE journal_lines DROP CONSTRAINT journal_lines_entry_fkey;

CREATE OR REPLACE FUNCTION holon_journal_lines_balanced() RETURNS trigger
LANGUAGE plpgsql
-- The function's plan is made once, maybe on tables that were nearly
-- empty then: each entry is looked up by its key, whatever they held.
SET enable_seqscan = off SET enable_hashjoin = off SET enable_mergejoin = off SET enable_bitmapscan = off
AS $$
DECLARE
    e     bigint;
    total numeric;
    n     integer;
BEGIN
    SELECT a.entry INTO e
    FROM (SELECT DISTINCT entry FROM added) a
    WHERE NOT EXISTS (SELECT FROM journal_entries j WHERE j.seq = a.entry)
    ORDER BY a.entry
    LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'journal line for entry %, which does not exist: an entry is written before its lines', e
            USING ERRCODE = 'foreign_key_violation';
    END IF;
    SELECT a.entry, s.total, s.n INTO e, total, n
    FROM (SELECT DISTINCT entry FROM added) a
        CROSS JOIN LATERAL (SELECT coalesce(sum(l.amount), 0) AS total, count(*) AS n
            FROM journal_lines l WHERE l.entry = a.entry) s
    WHERE s.n < 2 OR s.total <> 0
    ORDER BY a.entry
    LIMIT 1;
    IF NOT FOUND THEN
        RETURN NULL;
    END IF;
    IF n < 2 THEN
        RAISE EXCEPTION 'journal entry % has % line(s): an entry needs at least two', e, n
            USING ERRCODE = 'check_violation';
    END IF;
    RAISE EXCEPTION 'journal entry % does not sum to zero (its lines sum to %)', e, total
        USING ERRCODE = 'check_violation';
END
$$;

DROP INDEX receipts_parent;
CREATE INDEX receipts_parent ON receipts (parent) WHERE parent IS NOT NULL;
