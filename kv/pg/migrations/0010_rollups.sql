-- Version 9: the spend and earnings rollups (holon.RollupsTx), kept as
-- calls settle and refunds are made. A row is one kind (s: a payer's
-- spend, e: an author's earnings), owner, dimension (d, m, a, k, v), UTC
-- day (days since 1970-01-01) and value, in one currency. They are
-- derived from the receipts and refunds: a database migrated to this
-- version has none, and the first gateway to start rebuilds them (meta
-- rollups_kept says it did).
CREATE TABLE rollups (
    kind     text    NOT NULL,
    owner    text    NOT NULL,
    dim      text    NOT NULL,
    day      integer NOT NULL,
    value    text    NOT NULL,
    currency text    NOT NULL,
    calls    bigint  NOT NULL CHECK (calls >= 0),
    amount   numeric(20,6) NOT NULL CHECK (amount >= 0),
    refunded numeric(20,6) NOT NULL CHECK (refunded >= 0),
    PRIMARY KEY (kind, owner, dim, day, value, currency)
);
