-- Version 23: a journal line's account is checked once per statement, not
-- once per line; an account, once there, stays.
--
-- Until this version each line's deferred foreign key to its account ran a
-- query at commit (three a settled call), and each such query locked the
-- account's row (FOR KEY SHARE), which writes a lock to the row and to the
-- write-ahead log: the platform's and an author's rows, which every
-- settlement also moves, got one such lock per line. The rule is the same,
-- checked when the lines' statement ends, by holon_journal_lines_balanced
-- (which already checks their entry and balance there), in one query for
-- all the statement's lines: a line's account exists. So an account is
-- written before the lines that name it (the store moves it first). The
-- foreign key also kept an account with lines from being deleted or
-- renamed; nothing does either, and now the database refuses both for
-- every account, as it refuses changes to the journal.
ALTER TABLE journal_lines DROP CONSTRAINT journal_lines_account_fkey;

CREATE OR REPLACE FUNCTION holon_journal_lines_balanced() RETURNS trigger
LANGUAGE plpgsql
-- The function's plan is made once, maybe on tables that were nearly
-- empty then: each entry is looked up by its key, whatever they held.
SET enable_seqscan = off SET enable_hashjoin = off SET enable_mergejoin = off SET enable_bitmapscan = off
AS $$
DECLARE
    e     bigint;
    acct  text;
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
    SELECT a.account INTO acct
    FROM (SELECT DISTINCT account FROM added) a
    WHERE NOT EXISTS (SELECT FROM accounts x WHERE x.name = a.account)
    ORDER BY a.account COLLATE "C"
    LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'journal line for account %, which does not exist: an account is written before its lines', acct
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

CREATE FUNCTION holon_account_kept() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'TRUNCATE' THEN
        RAISE EXCEPTION 'accounts cannot be truncated: journal lines may name them'
            USING ERRCODE = 'foreign_key_violation';
    END IF;
    RAISE EXCEPTION 'account % cannot be deleted or renamed: journal lines may name it', OLD.name
        USING ERRCODE = 'foreign_key_violation';
END $$;
CREATE TRIGGER accounts_kept BEFORE DELETE OR UPDATE OF name ON accounts
    FOR EACH ROW EXECUTE FUNCTION holon_account_kept();
CREATE TRIGGER accounts_no_truncate BEFORE TRUNCATE ON accounts
    FOR EACH STATEMENT EXECUTE FUNCTION holon_account_kept();
