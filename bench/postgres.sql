-- A settled call in PostgreSQL, built the way its experts build it, for
-- `holon bench`'s peer row. Amounts are integer micro-units (bigint).
--
-- * One transaction per call: settle_call, a function the client calls with
--   a prepared statement.
-- * The journal's rule held by the database: an entry's lines are two
--   arrays with a CHECK that they sum to zero; no trigger.
-- * Credits appended as lines: the platform's and the author's balances are
--   the sums of their lines (account_balances), never a row every call
--   updates.
-- * A hot balance split over rows: each payer's balance and each mandate's
--   budget is split over one row per pool connection (slot), so that no two
--   connections wait on the same row; a guarded UPDATE (balance - held >=
--   price, spent + price <= allowance) debits it.
-- * Every foreign-key column indexed.

CREATE TABLE accounts (
	name text PRIMARY KEY
);

CREATE TABLE balance_slots (
	account text NOT NULL REFERENCES accounts (name), -- indexed: the key's prefix
	slot int NOT NULL,
	balance bigint NOT NULL,
	held bigint NOT NULL DEFAULT 0,
	PRIMARY KEY (account, slot),
	CHECK (held >= 0 AND balance - held >= 0)
);

CREATE TABLE mandates (
	id text PRIMARY KEY,
	payer text NOT NULL REFERENCES accounts (name)
);
CREATE INDEX ON mandates (payer);

CREATE TABLE budget_slots (
	mandate text NOT NULL REFERENCES mandates (id), -- indexed: the key's prefix
	slot int NOT NULL,
	allowance bigint NOT NULL,
	spent bigint NOT NULL DEFAULT 0,
	PRIMARY KEY (mandate, slot),
	CHECK (spent >= 0 AND spent <= allowance)
);

CREATE TABLE receipts (
	id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	mandate text NOT NULL REFERENCES mandates (id),
	agent text NOT NULL,
	status text NOT NULL,
	cost bigint NOT NULL,
	created timestamptz NOT NULL DEFAULT now()
);
-- A mandate's receipts, newest first (and the foreign key's index).
CREATE INDEX ON receipts (mandate, id);

CREATE FUNCTION zero_sum(bigint[]) RETURNS boolean
	LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
	AS 'SELECT coalesce(sum(x), 0) = 0 FROM unnest($1) x';

CREATE TABLE journal_entries (
	seq bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	key text NOT NULL UNIQUE, -- the idempotency key
	receipt bigint REFERENCES receipts (id),
	accounts text[] NOT NULL,
	amounts bigint[] NOT NULL,
	time timestamptz NOT NULL DEFAULT now(),
	CHECK (cardinality(accounts) = cardinality(amounts) AND cardinality(amounts) >= 2),
	CHECK (zero_sum(amounts))
);
CREATE INDEX ON journal_entries (receipt);

CREATE VIEW account_balances AS
	SELECT l.account, sum(l.amount)::bigint AS balance
	FROM journal_entries e, unnest(e.accounts, e.amounts) AS l (account, amount)
	GROUP BY l.account;

-- settle_call is one settled call of an in-process agent: the budget and
-- the payer's balance debited on the connection's own rows, the receipt,
-- and the journal entry (the payer's debit and the credits as lines) under
-- its idempotency key. A refusal raises, and the transaction leaves nothing.
CREATE FUNCTION settle_call(p_mandate text, p_payer text, p_slot int, p_agent text, p_price bigint,
		p_credit_to text[], p_credit bigint[]) RETURNS bigint
	LANGUAGE plpgsql AS $$
DECLARE
	v_receipt bigint;
BEGIN
	UPDATE budget_slots SET spent = spent + p_price
		WHERE mandate = p_mandate AND slot = p_slot AND spent + p_price <= allowance;
	IF NOT FOUND THEN
		RAISE EXCEPTION 'over_budget: mandate % slot %', p_mandate, p_slot USING ERRCODE = 'P0001';
	END IF;
	UPDATE balance_slots SET balance = balance - p_price
		WHERE account = p_payer AND slot = p_slot AND balance - held >= p_price;
	IF NOT FOUND THEN
		RAISE EXCEPTION 'insufficient_funds: % slot %', p_payer, p_slot USING ERRCODE = 'P0001';
	END IF;
	INSERT INTO receipts (mandate, agent, status, cost) VALUES (p_mandate, p_agent, 'succeeded', p_price)
		RETURNING id INTO v_receipt;
	INSERT INTO journal_entries (key, receipt, accounts, amounts)
		VALUES ('settle:r' || v_receipt, v_receipt, p_payer || p_credit_to, (-p_price) || p_credit);
	RETURN v_receipt;
END $$;

-- seed_payer funds a payer from outside (a journal entry) and gives its
-- mandate a budget of the same amount, both split evenly over p_slots rows.
CREATE FUNCTION seed_payer(p_payer text, p_mandate text, p_amount bigint, p_slots int) RETURNS void
	LANGUAGE plpgsql AS $$
BEGIN
	INSERT INTO accounts VALUES (p_payer), ('external:demo-credit'), ('holon'), ('bench') ON CONFLICT DO NOTHING;
	INSERT INTO mandates VALUES (p_mandate, p_payer);
	INSERT INTO journal_entries (key, accounts, amounts)
		VALUES ('signup:' || p_payer, ARRAY['external:demo-credit', p_payer], ARRAY[-p_amount, p_amount]);
	INSERT INTO balance_slots (account, slot, balance)
		SELECT p_payer, s, p_amount / p_slots + CASE WHEN s = 0 THEN p_amount % p_slots ELSE 0 END
		FROM generate_series(0, p_slots - 1) s;
	INSERT INTO budget_slots (mandate, slot, allowance)
		SELECT p_mandate, s, p_amount / p_slots + CASE WHEN s = 0 THEN p_amount % p_slots ELSE 0 END
		FROM generate_series(0, p_slots - 1) s;
END $$;
