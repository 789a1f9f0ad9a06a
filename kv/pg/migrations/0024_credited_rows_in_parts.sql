-- Version 24: the rows every settlement credits, in one part per gateway.
--
-- Each settlement credits the platform's account and its author's, and
-- adds to its agent's record, whichever gateway runs it: rows that every
-- gateway's writer would otherwise change, each change holding the row
-- until its COMMIT. An account or a record is now one row per part, and
-- what it holds is the sum of its parts. Part 0 is the row as it was: a
-- store loaded from a backup, and a gateway alone on its database (which
-- claims the journal's chain 0), write nothing else. A gateway whose
-- writer extends chain n > 0 writes its credits to part n: an account's
-- move that only raises its balance, and every addition to a record. Every
-- other change goes to part 0 (a debit, a hold, a refund's return of a
-- record's billing), so that part 0 alone may go below zero, and the
-- database judges the sums: an account's parts are never lowered (below),
-- so what a check reads of another gateway's parts is at most what they
-- hold by the time it commits.
ALTER TABLE accounts ADD COLUMN part integer NOT NULL DEFAULT 0 CHECK (part >= 0);
ALTER TABLE accounts DROP CONSTRAINT accounts_pkey;
ALTER TABLE accounts ADD PRIMARY KEY (name, part);
ALTER TABLE accounts ADD CONSTRAINT accounts_parts_credited CHECK (part = 0 OR held = 0);

CREATE FUNCTION holon_part_lowered() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION '% % part % would go down: a part takes only credits (part 0 takes every other change)',
        TG_TABLE_NAME, coalesce(to_jsonb(OLD) ->> 'name', to_jsonb(OLD) ->> 'agent'), OLD.part
        USING ERRCODE = 'check_violation';
END $$;
CREATE TRIGGER accounts_parts_credited BEFORE UPDATE ON accounts FOR EACH ROW
    WHEN (OLD.part > 0 AND (NEW.balance < OLD.balance OR NEW.part <> OLD.part))
    EXECUTE FUNCTION holon_part_lowered();

-- An account is available as the sum of its parts (version 18).
CREATE OR REPLACE FUNCTION holon_account_available() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF (SELECT sum(balance) < sum(held) FROM accounts WHERE name = NEW.name) THEN
        RAISE EXCEPTION 'account % is overdrawn', NEW.name
            USING ERRCODE = 'check_violation', CONSTRAINT = 'accounts_available', DETAIL = NEW.name;
    END IF;
    RETURN NULL;
END $$;

-- Records: part 0 takes what lowers a record (a refund), and its checks
-- judge the sums, when the transaction's deferred checks run.
ALTER TABLE agent_records ADD COLUMN part integer NOT NULL DEFAULT 0 CHECK (part >= 0);
ALTER TABLE agent_records DROP CONSTRAINT agent_records_pkey;
ALTER TABLE agent_records ADD PRIMARY KEY (agent, part);
ALTER TABLE agent_records DROP CONSTRAINT agent_records_billed_check;
ALTER TABLE agent_records DROP CONSTRAINT agent_records_check;
ALTER TABLE agent_records DROP CONSTRAINT agent_records_runs_check;
ALTER TABLE agent_records ADD CONSTRAINT agent_records_part_counts
    CHECK (part = 0 OR (runs >= 0 AND billed >= 0 AND succeeded >= 0 AND succeeded <= runs));
CREATE TRIGGER agent_records_parts_credited BEFORE UPDATE ON agent_records FOR EACH ROW
    WHEN (OLD.part > 0 AND (NEW.runs < OLD.runs OR NEW.succeeded < OLD.succeeded OR NEW.billed < OLD.billed
        OR NEW.duration_ms < OLD.duration_ms OR NEW.part <> OLD.part))
    EXECUTE FUNCTION holon_part_lowered();

CREATE FUNCTION holon_record_counts() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    r record;
BEGIN
    SELECT sum(runs) AS runs, sum(succeeded) AS succeeded, sum(billed) AS billed INTO r
    FROM agent_records WHERE agent = NEW.agent;
    IF r.runs < 0 OR r.billed < 0 OR r.succeeded < 0 OR r.succeeded > r.runs THEN
        RAISE EXCEPTION 'the record of % would count % runs, % succeeded, % billed', NEW.agent, r.runs, r.succeeded, r.billed
            USING ERRCODE = 'check_violation', CONSTRAINT = 'agent_records_counts';
    END IF;
    RETURN NULL;
END $$;
CREATE CONSTRAINT TRIGGER agent_records_counts AFTER INSERT OR UPDATE ON agent_records
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW
    WHEN (NEW.part = 0 AND (NEW.runs < 0 OR NEW.billed < 0 OR NEW.succeeded < 0 OR NEW.succeeded > NEW.runs))
    EXECUTE FUNCTION holon_record_counts();
