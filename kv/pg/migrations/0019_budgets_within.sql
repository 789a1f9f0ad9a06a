-- Version 19: no update raises a budget above the limit the gateway
-- judged it against (holon.BudgetLimits). A budget's move carries the
-- limit its update declared (cap; NULL: none declared), and a statement
-- that leaves a budget above it, raised, has the budget checked again
-- when the transaction's deferred checks run, from the row itself: a
-- reservation judged on a budget another gateway has raised since cannot
-- overspend it.
ALTER TABLE budgets ADD COLUMN cap numeric(20,6);
ALTER TABLE budget_windows ADD COLUMN cap numeric(20,6);

CREATE FUNCTION holon_budget_within() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    over boolean;
BEGIN
    IF TG_TABLE_NAME = 'budgets' THEN
        SELECT spent + reserved > cap INTO over FROM budgets WHERE mandate = NEW.mandate;
    ELSE
        SELECT spent + reserved > cap INTO over FROM budget_windows WHERE mandate = NEW.mandate AND win = NEW.win;
    END IF;
    IF over THEN
        RAISE EXCEPTION 'the budget of % would go over its limit', NEW.mandate
            USING ERRCODE = 'check_violation', CONSTRAINT = 'budgets_within';
    END IF;
    RETURN NULL;
END $$;
CREATE CONSTRAINT TRIGGER budgets_within_insert AFTER INSERT ON budgets
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW
    WHEN (NEW.spent + NEW.reserved > NEW.cap)
    EXECUTE FUNCTION holon_budget_within();
CREATE CONSTRAINT TRIGGER budgets_within_update AFTER UPDATE ON budgets
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW
    WHEN (NEW.spent + NEW.reserved > NEW.cap AND NEW.spent + NEW.reserved > OLD.spent + OLD.reserved)
    EXECUTE FUNCTION holon_budget_within();
CREATE CONSTRAINT TRIGGER budget_windows_within_insert AFTER INSERT ON budget_windows
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW
    WHEN (NEW.spent + NEW.reserved > NEW.cap)
    EXECUTE FUNCTION holon_budget_within();
CREATE CONSTRAINT TRIGGER budget_windows_within_update AFTER UPDATE ON budget_windows
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW
    WHEN (NEW.spent + NEW.reserved > NEW.cap AND NEW.spent + NEW.reserved > OLD.spent + OLD.reserved)
    EXECUTE FUNCTION holon_budget_within();
