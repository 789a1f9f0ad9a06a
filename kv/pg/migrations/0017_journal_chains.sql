-- Version 17: the journal's chains. Each gateway's writer extends a hash
-- chain of its own, whose head meta records under journal_head for chain
-- 0 (the chain a store loaded from an embedded one goes on with) and
-- journal_head:n for the others. A gateway claims at start the lowest
-- chain whose gateway holds no live lease, or the next number.
CREATE TABLE journal_chains (
    n       integer PRIMARY KEY CHECK (n >= 0),
    gateway text NOT NULL
);
