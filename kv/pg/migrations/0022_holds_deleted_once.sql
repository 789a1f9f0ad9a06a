-- Version 22: a hold is deleted once. A writer deletes the holds of the
-- calls it settles as it read them; a hold another gateway deleted since
-- (a call it closed, its gateway's lease having run out) is missing from
-- what the deletion returns, and the transaction is refused, naming the
-- hold (the error's detail: the table, a line break, the key), so that
-- the release of its amount is not counted twice, and the writer forgets
-- what it knew of the row.
CREATE FUNCTION holon_all_gone(tbl text, want text[], got text[]) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    missing text;
BEGIN
    IF cardinality(want) = coalesce(cardinality(got), 0) THEN
        RETURN;
    END IF;
    SELECT w INTO missing FROM unnest(want) AS w WHERE got IS NULL OR NOT w = ANY(got) LIMIT 1;
    IF missing IS NULL THEN
        RETURN; -- a key named twice
    END IF;
    RAISE EXCEPTION 'the % row % was deleted by another writer since this one read it', tbl, missing
        USING ERRCODE = 'check_violation', CONSTRAINT = 'rows_gone_once', DETAIL = tbl || chr(10) || missing;
END $$;
