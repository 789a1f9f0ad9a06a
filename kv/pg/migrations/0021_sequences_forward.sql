-- Version 21: a sequence never goes back. Writers take their numbers in
-- blocks, each in a short transaction that moves the bucket's sequence
-- forward (kv/pg numbers.go), and no group writes a sequence any more: a
-- gateway of an earlier version, which wrote a sequence's new value with
-- its group, would hand out numbers another gateway holds in a block. Its
-- group is refused here instead (a store's gateways are upgraded
-- together: stop them all, then start the new version). The one way back
-- is a store closing that gives back the end of its last block, the
-- sequence's newest numbers, no other writer having taken any after it:
-- its transaction says so (holon.give_back).
CREATE FUNCTION holon_sequence_forward() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.value < OLD.value AND coalesce(current_setting('holon.give_back', true), '') <> 'on' THEN
        RAISE EXCEPTION 'the sequence of % would go back from % to %', NEW.bucket, OLD.value, NEW.value
            USING ERRCODE = 'check_violation', CONSTRAINT = 'sequences_forward';
    END IF;
    RETURN NEW;
END $$;
CREATE TRIGGER sequences_forward BEFORE UPDATE ON sequences
    FOR EACH ROW EXECUTE FUNCTION holon_sequence_forward();
