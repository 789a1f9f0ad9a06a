-- Version 20: the checks of versions 18 and 19 name the row they refuse
-- (the error's detail: the account's name; the mandate, and the window
-- when it is one's), so that the writer whose update they refused forgets
-- what it knew of that row, which the refusal showed stale, and reads it
-- again when next needed.
CREATE OR REPLACE FUNCTION holon_account_available() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF EXISTS (SELECT FROM accounts WHERE name = NEW.name AND balance < held) THEN
        RAISE EXCEPTION 'account % is overdrawn', NEW.name
            USING ERRCODE = 'check_violation', CONSTRAINT = 'accounts_available', DETAIL = NEW.name;
    END IF;
    RETURN NULL;
END $$;

CREATE OR REPLACE FUNCTION holon_budget_within() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    over boolean;
    win text := '';
BEGIN
    IF TG_TABLE_NAME = 'budgets' THEN
        SELECT spent + reserved > cap INTO over FROM budgets WHERE mandate = NEW.mandate;
    ELSE
        SELECT spent + reserved > cap INTO over FROM budget_windows WHERE mandate = NEW.mandate AND win = NEW.win;
        win := NEW.win;
    END IF;
    IF over THEN
        RAISE EXCEPTION 'the budget of % would go over its limit', NEW.mandate
            USING ERRCODE = 'check_violation', CONSTRAINT = 'budgets_within', DETAIL = NEW.mandate || chr(10) || win;
    END IF;
    RETURN NULL;
END $$;
