-- Version 15: a group's rollup additions are one row of arrays, folded
-- into rollups later. Until this version every group upserted each
-- rollup row it added to: four rows a settled call, 32-39 µs of the
-- writers' server time a call (pg_stat_statements during `holon bench`
-- rows [10] and [11]), a quarter of what a group's statements cost, all
-- of it while the group holds the writers' lock. Now a group inserts one
-- row here, and the gateway that leads the job rollups_fold folds the
-- rows into rollups a few times a second, outside the writers' lock (no
-- writer touches a rollups row but through this table).
--
-- A rollup's value is its rollups row plus its additions still here:
-- readers add both (in one snapshot, where a fold is all or nothing), so
-- a read is exact at every instant, folded or not. Additions here are
-- never below zero (the CHECK); an addition that is (no gateway makes
-- one, but the store allows it while the sum stays at or above zero)
-- folds this table first and goes to rollups itself, under rollups'
-- own CHECKs.
CREATE TABLE rollup_deltas (
    id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    kinds      text[]   NOT NULL,
    owners     text[]   NOT NULL,
    dims       text[]   NOT NULL,
    days       integer[] NOT NULL,
    vals       text[]   NOT NULL,
    currencies text[]   NOT NULL,
    calls      bigint[] NOT NULL,
    -- In micro-units.
    amounts    bigint[] NOT NULL,
    refunded   bigint[] NOT NULL,
    CHECK (cardinality(kinds) > 0
        AND cardinality(owners) = cardinality(kinds) AND cardinality(dims) = cardinality(kinds)
        AND cardinality(days) = cardinality(kinds) AND cardinality(vals) = cardinality(kinds)
        AND cardinality(currencies) = cardinality(kinds) AND cardinality(calls) = cardinality(kinds)
        AND cardinality(amounts) = cardinality(kinds) AND cardinality(refunded) = cardinality(kinds)),
    CHECK (0 <= ALL (calls) AND 0 <= ALL (amounts) AND 0 <= ALL (refunded))
);

-- holon_fold_rollups moves every addition in rollup_deltas into rollups,
-- summed by row, and returns how many rollups rows it changed. Rows that
-- another fold deletes first are left to it (a DELETE skips them once that
-- fold commits), and rollups rows are changed in key order (bytewise, as
-- the store's own fold orders them), so two folds at once wait for each
-- other and never deadlock.
CREATE FUNCTION holon_fold_rollups() RETURNS bigint
LANGUAGE sql AS $$
    WITH d AS (
        DELETE FROM rollup_deltas
        RETURNING kinds, owners, dims, days, vals, currencies, calls, amounts, refunded
    ), x AS (
        SELECT u.k, u.o, u.dm, u.y, u.v, u.c, sum(u.n) AS n, sum(u.a) AS a, sum(u.f) AS f
        FROM d, unnest(d.kinds, d.owners, d.dims, d.days, d.vals, d.currencies, d.calls, d.amounts, d.refunded)
            AS u (k, o, dm, y, v, c, n, a, f)
        GROUP BY u.k, u.o, u.dm, u.y, u.v, u.c
    ), i AS (
        INSERT INTO rollups AS r (kind, owner, dim, day, value, currency, calls, amount, refunded)
        SELECT k, o, dm, y, v, c, n, a / 1000000.0, f / 1000000.0 FROM x
        ORDER BY k COLLATE "C", o COLLATE "C", dm COLLATE "C", y, v COLLATE "C", c COLLATE "C"
        ON CONFLICT (kind, owner, dim, day, value, currency) DO UPDATE SET calls = r.calls + EXCLUDED.calls,
            amount = r.amount + EXCLUDED.amount, refunded = r.refunded + EXCLUDED.refunded
        RETURNING 1
    )
    SELECT count(*) FROM i
$$;
