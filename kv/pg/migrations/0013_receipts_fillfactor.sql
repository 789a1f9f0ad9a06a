-- Version 13: receipts' pages keep room for a receipt's second state. A
-- call's receipt is written when its reservation is made (running) and
-- again when it settles, a few milliseconds later, on the same page; with
-- the pages filled by the inserts, that second write went to another page
-- and into every one of the table's five indexes (heap-only for 12-15%
-- of them). With 30% of each new page kept free it stays on its page,
-- without index entries, for 53-58% of them, and the receipts cost the
-- writer 32.0-32.9 µs of server time per call against 35.2-36.1. Pages
-- written before this version keep their fill.
ALTER TABLE receipts SET (fillfactor = 70);
