-- Version 14: journal lines are checked once per statement, not once per
-- line. Version 1 checked an entry's balance from a deferred trigger fired
-- by every line inserted and by the entry: four firings a settled call,
-- each summing the entry's lines again, 33.7 µs of the one writer's server
-- time a call (pg_stat_statements during `holon bench` row [10]); with
-- this version the entry's firing and the statement's share, 15.6 µs.
--
-- The rules are the same; when they are checked:
--   * lines inserted for an entry that exists when their statement ends
--     (written before, or earlier in the same transaction) are checked at
--     the end of that statement: the entry's lines, all of them, must
--     number at least two and sum to zero;
--   * an entry inserted is checked at commit, as before (its row's
--     deferred trigger): this covers lines inserted before their entry, and
--     an entry left with no lines at all.
-- So every entry a transaction touches is checked, and a line added to an
-- entry written earlier is refused at once. A writer puts an entry's
-- lines in one statement after it (the store does), or before it.
DROP TRIGGER journal_lines_balanced ON journal_lines;

CREATE FUNCTION holon_journal_lines_balanced() RETURNS trigger
LANGUAGE plpgsql
-- The function's plan is made once, maybe on tables that were nearly
-- empty then: each entry is looked up by its keys, whatever they held.
SET enable_seqscan = off SET enable_hashjoin = off SET enable_mergejoin = off SET enable_bitmapscan = off
AS $$
DECLARE
    e     bigint;
    total numeric;
    n     integer;
BEGIN
    SELECT a.entry, s.total, s.n INTO e, total, n
    FROM (SELECT DISTINCT entry FROM added) a
        JOIN journal_entries j ON j.seq = a.entry
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

CREATE TRIGGER journal_lines_balanced
    AFTER INSERT ON journal_lines REFERENCING NEW TABLE AS added
    FOR EACH STATEMENT EXECUTE FUNCTION holon_journal_lines_balanced();
