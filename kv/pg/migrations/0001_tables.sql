-- Holon's store as PostgreSQL tables: version 1 of the schema, the tables
-- a backup loads into (`holon restore --to-postgres`) and the PostgreSQL
-- store serves from (`holon serve --store postgres://…`). The store applies
-- the versions after it itself (migrations/, recorded in holon_schema).
--
-- Amounts are NUMERIC(20,6): the store's integer micro-units, exactly.
-- Times are text, RFC 3339 with nanoseconds and the zone offset exactly as
-- the store wrote them (timestamptz would keep microseconds and no offset,
-- and a restored store would differ from its backup): read them with
-- ::timestamptz. Documents are json, not jsonb, for the same reason: json
-- keeps the text as written, jsonb reorders keys and rewrites numbers.
-- The loader reads every row back and compares it with the backup's.
--
-- The journal's rules hold here as they do in the store:
--   * an entry whose lines do not sum to zero (or that has fewer than two
--     lines) is refused at commit (deferred constraint triggers);
--   * journal rows are never updated or deleted: a correction is a new
--     entry (triggers raise an exception; TRUNCATE too);
--   * idempotency keys are unique (journal_entries.key).

-- The backup this database was loaded from.
CREATE TABLE holon_backup (
    format_version integer     NOT NULL,
    gateway        text        NOT NULL,
    store_schema   integer     NOT NULL,
    taken          timestamptz NOT NULL,
    row_count      bigint      NOT NULL,
    sha256         text        NOT NULL,
    loaded         timestamptz NOT NULL DEFAULT now()
);

-- The store's own metadata: schema version, journal head.
CREATE TABLE meta (
    key   text PRIMARY KEY,
    value text NOT NULL
);

-- Every bucket's sequence: the last id handed out.
CREATE TABLE sequences (
    bucket text PRIMARY KEY,
    value  numeric(20,0) NOT NULL CHECK (value >= 0)
);

CREATE TABLE counters (
    name  text PRIMARY KEY,
    value numeric(20,0) NOT NULL CHECK (value >= 0)
);

-- An account's balance is the sum of its journal lines (checked when
-- loading; see the journal_balances view); held is what calls in flight hold.
CREATE TABLE accounts (
    name    text PRIMARY KEY,
    balance numeric(20,6) NOT NULL,
    held    numeric(20,6) NOT NULL CHECK (held >= 0)
);

CREATE TABLE journal_entries (
    seq  bigint PRIMARY KEY CHECK (seq > 0),
    key  text NOT NULL UNIQUE CHECK (key <> ''),
    time text NOT NULL CHECK (time::timestamptz IS NOT NULL),
    -- The hash chain: hash covers the entry and prev, the hash of the entry before.
    prev text NOT NULL,
    hash text NOT NULL UNIQUE
);

CREATE TABLE journal_lines (
    entry    bigint NOT NULL REFERENCES journal_entries (seq) DEFERRABLE INITIALLY DEFERRED,
    position integer NOT NULL CHECK (position > 0),
    account  text NOT NULL REFERENCES accounts (name) DEFERRABLE INITIALLY DEFERRED,
    amount   numeric(20,6) NOT NULL,
    PRIMARY KEY (entry, position),
    UNIQUE (entry, account)
);
CREATE INDEX journal_lines_account ON journal_lines (account);

CREATE FUNCTION holon_journal_entry_balanced() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    e     bigint;
    total numeric;
    n     integer;
BEGIN
    IF TG_TABLE_NAME = 'journal_lines' THEN
        e := NEW.entry;
    ELSE
        e := NEW.seq;
    END IF;
    SELECT coalesce(sum(amount), 0), count(*) INTO total, n FROM journal_lines WHERE entry = e;
    IF n < 2 THEN
        RAISE EXCEPTION 'journal entry % has % line(s): an entry needs at least two', e, n
            USING ERRCODE = 'check_violation';
    END IF;
    IF total <> 0 THEN
        RAISE EXCEPTION 'journal entry % does not sum to zero (its lines sum to %)', e, total
            USING ERRCODE = 'check_violation';
    END IF;
    RETURN NULL;
END
$$;

CREATE CONSTRAINT TRIGGER journal_lines_balanced
    AFTER INSERT ON journal_lines DEFERRABLE INITIALLY DEFERRED
    FOR EACH ROW EXECUTE FUNCTION holon_journal_entry_balanced();
CREATE CONSTRAINT TRIGGER journal_entries_balanced
    AFTER INSERT ON journal_entries DEFERRABLE INITIALLY DEFERRED
    FOR EACH ROW EXECUTE FUNCTION holon_journal_entry_balanced();

CREATE FUNCTION holon_append_only() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION '% is append-only: % refused (a correction is a new entry)', TG_TABLE_NAME, TG_OP
        USING ERRCODE = 'integrity_constraint_violation';
END
$$;

CREATE TRIGGER journal_entries_append_only BEFORE UPDATE OR DELETE ON journal_entries
    FOR EACH ROW EXECUTE FUNCTION holon_append_only();
CREATE TRIGGER journal_entries_no_truncate BEFORE TRUNCATE ON journal_entries
    FOR EACH STATEMENT EXECUTE FUNCTION holon_append_only();
CREATE TRIGGER journal_lines_append_only BEFORE UPDATE OR DELETE ON journal_lines
    FOR EACH ROW EXECUTE FUNCTION holon_append_only();
CREATE TRIGGER journal_lines_no_truncate BEFORE TRUNCATE ON journal_lines
    FOR EACH STATEMENT EXECUTE FUNCTION holon_append_only();

-- Balances as the journal says they are.
CREATE VIEW journal_balances AS
    SELECT account, sum(amount)::numeric(20,6) AS balance
    FROM journal_lines GROUP BY account;

-- Documents: mandates (root and derived sub-mandates) and agent versions.
CREATE TABLE mandates (
    id        text PRIMARY KEY,
    doc       json NOT NULL,
    issuer    text GENERATED ALWAYS AS (doc ->> 'issuer') STORED,
    created   text NOT NULL CHECK (created::timestamptz IS NOT NULL),
    published boolean NOT NULL,
    yanked    text,
    revoked   boolean NOT NULL
);

CREATE TABLE agents (
    ref       text PRIMARY KEY,
    doc       json NOT NULL,
    created   text NOT NULL CHECK (created::timestamptz IS NOT NULL),
    published boolean NOT NULL,
    yanked    text,
    revoked   boolean NOT NULL
);

-- What was billed under a mandate, and what calls in flight reserve.
CREATE TABLE budgets (
    mandate  text PRIMARY KEY REFERENCES mandates (id) DEFERRABLE INITIALLY DEFERRED,
    spent    numeric(20,6) NOT NULL CHECK (spent >= 0),
    reserved numeric(20,6) NOT NULL CHECK (reserved >= 0)
);

CREATE TABLE receipts (
    id              text PRIMARY KEY CHECK (id ~ '^r[1-9][0-9]*$'),
    seq             bigint NOT NULL UNIQUE,
    parent          text REFERENCES receipts (id) DEFERRABLE INITIALLY DEFERRED,
    mandate         text NOT NULL,
    caller          text NOT NULL,
    agent           text,
    status          text NOT NULL CHECK (status IN ('running', 'succeeded', 'failed', 'denied', 'rejected', 'pending_approval')),
    error           text,
    approval        text,
    worst_case      numeric(20,6) CHECK (worst_case >= 0),
    currency        text NOT NULL,
    payer           text NOT NULL,
    sub_mandate     text REFERENCES mandates (id) DEFERRABLE INITIALLY DEFERRED,
    billed          boolean NOT NULL,
    cost_own        numeric(20,6) NOT NULL CHECK (cost_own >= 0),
    cost_downstream numeric(20,6) NOT NULL CHECK (cost_downstream >= 0),
    cost_total      numeric(20,6) NOT NULL,
    -- [{"to": account, "amount": "0.09"}, …], as in the receipt; NULL
    -- where the receipt's own list is null rather than empty.
    splits          jsonb,
    children        text[],
    duration_ms     bigint NOT NULL,
    created         text NOT NULL CHECK (created::timestamptz IS NOT NULL),
    CHECK (cost_total = cost_own + cost_downstream)
);
CREATE INDEX receipts_mandate ON receipts (mandate, seq);
CREATE INDEX receipts_parent ON receipts (parent);
CREATE INDEX receipts_payer ON receipts (payer);

CREATE VIEW receipt_splits AS
    SELECT r.id AS receipt, s.position::integer AS position, s.share ->> 'to' AS account,
           (s.share ->> 'amount')::numeric(20,6) AS amount
    FROM receipts r, jsonb_array_elements(r.splits) WITH ORDINALITY AS s (share, position);

CREATE TABLE approvals (
    id         text PRIMARY KEY CHECK (id ~ '^a[1-9][0-9]*$'),
    seq        bigint NOT NULL UNIQUE,
    mandate    text NOT NULL,
    caller     text NOT NULL,
    agent      text NOT NULL,
    -- Set when the held call asked for a capability rather than an agent.
    capability text,
    input_hash text NOT NULL,
    max_cost   numeric(20,6) CHECK (max_cost >= 0),
    worst_case numeric(20,6) NOT NULL CHECK (worst_case >= 0),
    currency   text NOT NULL,
    receipt    text NOT NULL REFERENCES receipts (id) DEFERRABLE INITIALLY DEFERRED,
    status     text NOT NULL CHECK (status IN ('pending', 'granted', 'used', 'rejected', 'expired')),
    created    text NOT NULL CHECK (created::timestamptz IS NOT NULL),
    expires    text NOT NULL CHECK (expires::timestamptz IS NOT NULL),
    decided    text CHECK (decided IS NULL OR decided::timestamptz IS NOT NULL),
    run        text REFERENCES receipts (id) DEFERRABLE INITIALLY DEFERRED,
    -- Kept only while the approval is undecided.
    input      json,
    CHECK (input IS NULL OR status IN ('pending', 'granted'))
);
ALTER TABLE receipts ADD FOREIGN KEY (approval) REFERENCES approvals (id) DEFERRABLE INITIALLY DEFERRED;

-- Calls in flight (empty once the gateway has stopped cleanly).
CREATE TABLE holds (
    receipt     text PRIMARY KEY REFERENCES receipts (id) DEFERRABLE INITIALLY DEFERRED,
    payer       text NOT NULL,
    amount      numeric(20,6) NOT NULL CHECK (amount >= 0),
    mandate     text NOT NULL,
    reserved    numeric(20,6) NOT NULL CHECK (reserved >= 0),
    funder      text REFERENCES holds (receipt) DEFERRABLE INITIALLY DEFERRED,
    parent      text REFERENCES receipts (id) DEFERRABLE INITIALLY DEFERRED,
    children    text[] NOT NULL,
    downstream  numeric(20,6) NOT NULL CHECK (downstream >= 0),
    sub_mandate text,
    started     text NOT NULL CHECK (started::timestamptz IS NOT NULL)
);

-- Every finished run, as the platform measures it: append-only.
CREATE TABLE call_events (
    seq         bigint PRIMARY KEY CHECK (seq > 0),
    receipt     text NOT NULL REFERENCES receipts (id) DEFERRABLE INITIALLY DEFERRED,
    agent       text NOT NULL,
    status      text NOT NULL,
    error       text,
    duration_ms bigint NOT NULL,
    billed      numeric(20,6) NOT NULL CHECK (billed >= 0),
    currency    text NOT NULL,
    delegated   boolean NOT NULL,
    time        text NOT NULL CHECK (time::timestamptz IS NOT NULL)
);
CREATE INDEX call_events_agent ON call_events (agent);
CREATE TRIGGER call_events_append_only BEFORE UPDATE OR DELETE ON call_events
    FOR EACH ROW EXECUTE FUNCTION holon_append_only();

-- Each agent version's record: the sums of its call events.
CREATE TABLE agent_records (
    agent       text PRIMARY KEY,
    runs        bigint NOT NULL CHECK (runs >= 0),
    succeeded   bigint NOT NULL CHECK (succeeded >= 0 AND succeeded <= runs),
    billed      numeric(20,6) NOT NULL CHECK (billed >= 0),
    duration_ms bigint NOT NULL
);

-- The hosted product's records (users, keys, idempotency keys, the
-- moderation log, files, settings, …) and any other bucket: the stored
-- JSON document, or the raw bytes of a value that is not one.
CREATE TABLE app_docs (
    bucket    text NOT NULL,
    -- The key as it reads: the text, the decimal of an 8-byte sequence key, or base64.
    key       text NOT NULL,
    key_bytes bytea NOT NULL,
    doc       json,
    raw       bytea,
    PRIMARY KEY (bucket, key_bytes),
    CHECK ((doc IS NULL) <> (raw IS NULL))
);

-- Endpoint credentials (gateway.md §6 "Authentication"), by agent id: the
-- token sealed with AES-256-GCM under a key derived from HOLON_FILE_SECRET
-- and bound to the agent id. Never in clear, here either: without the
-- secret these rows open for nobody. The stored document is kept as written (doc); the columns are generated
-- from it, so they cannot disagree with it.
CREATE TABLE credentials (
    agent   text PRIMARY KEY CHECK (agent ~ '^[a-z0-9]+(-[a-z0-9]+)*/[a-z0-9_-]{1,64}$'),
    doc     json NOT NULL,
    version integer GENERATED ALWAYS AS ((doc ->> 'v')::integer) STORED NOT NULL CHECK (version = 1),
    nonce   bytea GENERATED ALWAYS AS (decode(doc ->> 'nonce', 'base64')) STORED NOT NULL CHECK (length(nonce) = 12),
    sealed  bytea GENERATED ALWAYS AS (decode(doc ->> 'sealed', 'base64')) STORED NOT NULL CHECK (length(sealed) > 16),
    set_at  text GENERATED ALWAYS AS (doc ->> 'set') STORED NOT NULL CHECK (set_at::timestamptz IS NOT NULL)
);

-- GitHub sign-in: each GitHub account's link to its account ('github',
-- by GitHub id: the document is the handle as a JSON string), and the
-- states and one-time login codes under way ('state', 'code', by their
-- SHA-256: never the secret itself). As for credentials, the document is
-- kept as written and the columns are generated from it.
CREATE TABLE signin (
    key         text PRIMARY KEY,
    doc         json NOT NULL,
    kind        text GENERATED ALWAYS AS (split_part(key, '/', 1)) STORED NOT NULL CHECK (kind IN ('github', 'state', 'code')),
    github_id   bigint GENERATED ALWAYS AS (CASE WHEN split_part(key, '/', 1) = 'github' THEN split_part(key, '/', 2)::bigint END) STORED CHECK (github_id > 0),
    hash        text GENERATED ALWAYS AS (CASE WHEN split_part(key, '/', 1) <> 'github' THEN split_part(key, '/', 2) END) STORED CHECK (hash ~ '^[0-9a-f]{64}$'),
    handle      text GENERATED ALWAYS AS (CASE WHEN split_part(key, '/', 1) = 'github' THEN doc #>> '{}' ELSE doc ->> 'handle' END) STORED,
    new_account boolean GENERATED ALWAYS AS (CASE WHEN split_part(key, '/', 1) = 'code' THEN coalesce((doc ->> 'new')::boolean, false) ELSE false END) STORED NOT NULL,
    expires     text GENERATED ALWAYS AS (CASE WHEN split_part(key, '/', 1) <> 'github' THEN doc ->> 'expires' END) STORED
                CHECK (expires IS NULL OR expires::timestamptz IS NOT NULL),
    CHECK (kind <> 'github' OR (github_id IS NOT NULL AND handle IS NOT NULL AND expires IS NULL)),
    CHECK (kind = 'github' OR (hash IS NOT NULL AND expires IS NOT NULL)),
    CHECK (kind <> 'code' OR handle IS NOT NULL)
);
CREATE UNIQUE INDEX signin_github_handle ON signin (handle) WHERE kind = 'github';
-- Per-version counters and evaluations (kept as documents in app_docs),
-- read as tables. Earnings: one row per version and currency, what the
-- settlements paid its author (own share, royalties from forks); holon
-- verify checks them against the journal.
CREATE VIEW agent_earnings AS
    SELECT d.key AS agent, e.key AS currency,
           (e.value ->> 'paid_calls')::bigint AS paid_calls,
           (e.value ->> 'own')::numeric(20,6) AS own,
           (e.value ->> 'royalties')::numeric(20,6) AS royalties
    FROM app_docs d, json_each(d.doc) e
    WHERE d.bucket = 'earnings';

-- Each version's settled runs as a latency histogram (counts per bucket of
-- kv.LatencyBoundsMS, the last one slower).
CREATE VIEW agent_latency AS
    SELECT key AS agent, ARRAY(SELECT json_array_elements_text(doc -> 'counts')::bigint) AS counts
    FROM app_docs WHERE bucket = 'latency';

-- Each version's last evaluation (hidden cases as counts only), and the
-- versions waiting for one.
CREATE VIEW agent_evaluations AS
    SELECT key AS agent, (doc ->> 'passed')::boolean AS passed,
           (doc ->> 'finished')::timestamptz AS finished, doc -> 'suites' AS suites
    FROM app_docs WHERE bucket = 'evals';
CREATE VIEW eval_queue AS
    SELECT key AS agent, (doc ->> 'enqueued')::timestamptz AS enqueued, (doc ->> 'attempts')::int AS attempts
    FROM app_docs WHERE bucket = 'eval_queue';
