-- Version 25: counters in one part per gateway, as accounts and records
-- (version 24). Every new receipt moves the receipts' counters (all of
-- them, and its mandate's), which every gateway's writer would otherwise
-- change, each change holding the row until its COMMIT. A counter is now
-- one row per part, its value the sum of its rows: the gateway extending
-- the journal's chain N > 0 adds to part N what raises it, and any other
-- change goes to part 0, the only part that may go below zero; the
-- database judges the sum, and refuses to lower any other part.
ALTER TABLE counters ADD COLUMN part integer NOT NULL DEFAULT 0 CHECK (part >= 0);
ALTER TABLE counters DROP CONSTRAINT counters_pkey;
ALTER TABLE counters ADD PRIMARY KEY (name, part);
ALTER TABLE counters DROP CONSTRAINT counters_value_check;
ALTER TABLE counters ADD CONSTRAINT counters_part_value CHECK (part = 0 OR value >= 0);
CREATE TRIGGER counters_parts_credited BEFORE UPDATE ON counters FOR EACH ROW
    WHEN (OLD.part > 0 AND (NEW.value < OLD.value OR NEW.part <> OLD.part))
    EXECUTE FUNCTION holon_part_lowered();

CREATE FUNCTION holon_counter_sum() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    total numeric;
BEGIN
    SELECT sum(value) INTO total FROM counters WHERE name = NEW.name;
    IF total < 0 THEN
        RAISE EXCEPTION 'counter % would go below zero (%)', NEW.name, total
            USING ERRCODE = 'check_violation', CONSTRAINT = 'counters_value';
    END IF;
    RETURN NULL;
END $$;
CREATE CONSTRAINT TRIGGER counters_value AFTER INSERT OR UPDATE ON counters
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW
    WHEN (NEW.part = 0 AND NEW.value < 0)
    EXECUTE FUNCTION holon_counter_sum();
