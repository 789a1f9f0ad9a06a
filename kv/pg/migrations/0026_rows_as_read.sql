-- Version 26: a row written whole is written as the update read it. A
-- writer keeps the rows it read in memory; an update that read a document,
-- an agent version or mandate, an approval or a hold and then writes or
-- deletes it sends, before the write, a check that locks the row and
-- compares it with what the update read (an absent row: after a lock of
-- its key, so that two writers cannot both insert it), so that a change
-- another writer made since is not overwritten. A row that differs
-- refuses the transaction, naming the row as the writer keys it in its
-- memory (the error's detail), for the writer to read it again and run
-- the update on what it holds now.
CREATE FUNCTION holon_as_read(k text, same boolean) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    IF same THEN
        RETURN;
    END IF;
    RAISE EXCEPTION 'a row this update read was changed by another writer since (%)', replace(k, chr(31), ' ')
        USING ERRCODE = 'check_violation', CONSTRAINT = 'rows_as_read', DETAIL = k;
END $$;
