-- Version 12: the writers' log carries values. Beside the keys of the rows
-- a group changed, vals holds each row's new value when it is small (a
-- balance, a budget, a counter, a sequence, the journal's head, an agent's
-- record, a journal key's use), as the writer's cache encodes it (cache.go),
-- NULL for a row to read again. The next writer to take the lock, in
-- another gateway, keeps those values in its cache instead of reading the
-- rows again; an entry without vals (written before this version) forgets
-- its rows, as before.
ALTER TABLE writer_log ADD COLUMN vals text[];
