-- Version 2: what the store needs to serve from the tables of version 1.
--
-- The gateway, not the database, keeps the references between records (a
-- hold is written before its receipt, a budget before its mandate, as in
-- the embedded store): the deferred foreign keys of version 1 would refuse
-- a whole group of updates at its commit for one update's order of
-- writes, so the store drops them. The loader loads a backup into version 1
-- and checks them there before it applies this version.
ALTER TABLE budgets DROP CONSTRAINT budgets_mandate_fkey;
ALTER TABLE receipts DROP CONSTRAINT receipts_parent_fkey;
ALTER TABLE receipts DROP CONSTRAINT receipts_sub_mandate_fkey;
ALTER TABLE receipts DROP CONSTRAINT receipts_approval_fkey;
ALTER TABLE approvals DROP CONSTRAINT approvals_receipt_fkey;
ALTER TABLE approvals DROP CONSTRAINT approvals_run_fkey;
ALTER TABLE holds DROP CONSTRAINT holds_receipt_fkey;
ALTER TABLE holds DROP CONSTRAINT holds_funder_fkey;
ALTER TABLE holds DROP CONSTRAINT holds_parent_fkey;
ALTER TABLE call_events DROP CONSTRAINT call_events_receipt_fkey;

-- A mandate's approvals newest first (the console's and the API's pages).
CREATE INDEX approvals_mandate ON approvals (mandate, seq);

-- The gateways serving from this database, each with a lease it renews
-- while it runs: another gateway closes the calls in flight of one whose
-- lease ran out.
CREATE TABLE gateways (
    id      text PRIMARY KEY,
    started timestamptz NOT NULL,
    expires timestamptz NOT NULL
);
