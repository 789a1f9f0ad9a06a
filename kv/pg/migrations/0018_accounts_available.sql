-- Version 18: no update overdraws an account (holon.Overdrafts). The store
-- refuses it before its writes are sent, from what its writer knows; the
-- database refuses it too, from the rows themselves, so that a writer
-- that knew a balance another gateway has lowered since cannot overdraw
-- it. A statement that leaves an account other than an external one with
-- less than zero available (balance - held), and less than before, has
-- the account checked again when the transaction's deferred checks run
-- (at its COMMIT, or at the end of each update of a group run safely):
-- within a transaction the account may pass through such a state (a
-- settlement's debit, then the release of the hold that covered it).
CREATE FUNCTION holon_account_available() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF EXISTS (SELECT FROM accounts WHERE name = NEW.name AND balance < held) THEN
        RAISE EXCEPTION 'account % is overdrawn', NEW.name
            USING ERRCODE = 'check_violation', CONSTRAINT = 'accounts_available';
    END IF;
    RETURN NULL;
END $$;
CREATE CONSTRAINT TRIGGER accounts_available_insert AFTER INSERT ON accounts
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW
    WHEN (NEW.balance < NEW.held AND NEW.name NOT LIKE 'external:%')
    EXECUTE FUNCTION holon_account_available();
CREATE CONSTRAINT TRIGGER accounts_available_update AFTER UPDATE ON accounts
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW
    WHEN (NEW.balance < NEW.held AND NEW.name NOT LIKE 'external:%' AND NEW.balance - NEW.held < OLD.balance - OLD.held)
    EXECUTE FUNCTION holon_account_available();
