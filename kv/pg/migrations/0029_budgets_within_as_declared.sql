-- Version 29: a raised budget is judged against the limit its raise
-- declared.
--
-- A budget's move carries the limit its update declared (version 19),
-- and the deferred check judged the budget, at the commit, against the
-- cap column as the row then held it: the limit of the row's last move
-- in the transaction. A group moves a budget once per round trip, so a
-- group whose first round trip raised a budget with its limit and whose
-- next one moved it again with none (another call's settlement, which
-- declares no limit) left the cap NULL, and the check let the raise
-- through: three gateways on one database settled 0.06 under a mandate
-- of 0.05 (TestEngine_SharedStore_SettlementRechecksAdmission). Each raise
-- is now judged against its own limit (NEW.cap, the row as that move left
-- it), whatever the later moves of the transaction declared.
CREATE OR REPLACE FUNCTION holon_budget_within() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    over boolean;
    win text := '';
BEGIN
    IF TG_TABLE_NAME = 'budgets' THEN
        SELECT spent + reserved > NEW.cap INTO over FROM budgets WHERE mandate = NEW.mandate;
    ELSE
        SELECT spent + reserved > NEW.cap INTO over FROM budget_windows WHERE mandate = NEW.mandate AND win = NEW.win;
        win := NEW.win;
    END IF;
    IF over THEN
        RAISE EXCEPTION 'the budget of % would go over its limit', NEW.mandate
            USING ERRCODE = 'check_violation', CONSTRAINT = 'budgets_within', DETAIL = NEW.mandate || chr(10) || win;
    END IF;
    RETURN NULL;
END $$;
