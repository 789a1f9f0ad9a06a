-- Version 9: the writers' log. Every group of updates a gateway's writer
-- commits appends the keys of the rows it changed (balances, budgets,
-- holds, receipts, sequences, counters, documents…), numbered one after
-- the other under the writers' lock. A writer that takes the lock reads
-- the entries since its own last group and forgets those rows from its
-- cache; every other row it read or wrote is still as it left it. Old
-- entries are pruned; a writer that finds a gap forgets everything.
CREATE TABLE writer_log (
    gen  bigint PRIMARY KEY,
    keys text[] NOT NULL
);
