-- Version 8: refunds stay within their receipts. A refund (app_docs,
-- bucket refunds, one document per refund) gives back part of a billed
-- call's cost.own: it names a billed receipt, and together a receipt's
-- refunds never pass its cost.own. Checked at commit, for the rows of
-- that bucket only.
CREATE FUNCTION refunds_within_receipt() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    receipt_id text := NEW.doc ->> 'receipt';
    own numeric;
    is_billed boolean;
    refunded numeric;
BEGIN
    SELECT r.cost_own, r.billed INTO own, is_billed FROM receipts r WHERE r.id = receipt_id;
    IF NOT FOUND OR NOT is_billed THEN
        RAISE EXCEPTION 'refund % names receipt %, which is not a billed receipt', NEW.key, receipt_id
            USING ERRCODE = 'check_violation';
    END IF;
    SELECT coalesce(sum((d.doc ->> 'amount')::numeric), 0) INTO refunded
        FROM app_docs d WHERE d.bucket = 'refunds' AND d.doc ->> 'receipt' = receipt_id;
    IF refunded > own THEN
        RAISE EXCEPTION 'receipt % is refunded % in all, above its cost.own %', receipt_id, refunded, own
            USING ERRCODE = 'check_violation';
    END IF;
    RETURN NULL;
END $$;
CREATE CONSTRAINT TRIGGER refunds_within_receipt AFTER INSERT OR UPDATE ON app_docs
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW WHEN (NEW.bucket = 'refunds')
    EXECUTE FUNCTION refunds_within_receipt();
