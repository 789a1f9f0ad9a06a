-- Version 5: rate limits that hold across gateways. One token bucket per
-- key (an account, a client address), refilled by the database's clock
-- and taken from under the row's lock, so that N gateways admit the
-- limit, not N times it.
CREATE TABLE rate_buckets (
    key    text PRIMARY KEY,
    tokens double precision NOT NULL,
    rate   double precision NOT NULL,
    burst  double precision NOT NULL,
    at     timestamptz NOT NULL
);

-- take_token refills key's bucket (b tokens, r per second) for the time
-- since it was last taken from, takes one token when there is one, and
-- returns the tokens it held before: under 1, nothing was taken. A bucket
-- is a rate limit's, not money: its commit does not wait for the disk
-- (a crash forgets a few tokens taken, which a refill gives back anyway).
CREATE FUNCTION take_token(k text, r double precision, b double precision) RETURNS double precision
LANGUAGE plpgsql AS $$
DECLARE
    left_ double precision;
    last   timestamptz;
    now_   timestamptz;
    held   double precision;
BEGIN
    PERFORM set_config('synchronous_commit', 'off', true);
    LOOP
        SELECT tokens, at INTO left_, last FROM rate_buckets WHERE key = k FOR UPDATE;
        IF FOUND THEN
            now_ := clock_timestamp(); -- read once the row is ours
            held := LEAST(b, left_ + r * GREATEST(0, EXTRACT(EPOCH FROM now_ - last)));
            UPDATE rate_buckets SET tokens = CASE WHEN held >= 1 THEN held - 1 ELSE held END,
                rate = r, burst = b, at = GREATEST(last, now_)
                WHERE key = k;
            RETURN held;
        END IF;
        INSERT INTO rate_buckets (key, tokens, rate, burst, at)
            VALUES (k, CASE WHEN b >= 1 THEN b - 1 ELSE b END, r, b, clock_timestamp())
            ON CONFLICT (key) DO NOTHING;
        IF FOUND THEN
            RETURN b;
        END IF;
        -- Another gateway made the bucket meanwhile: take from it.
    END LOOP;
END
$$;
