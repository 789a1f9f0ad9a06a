-- Version 6: work that runs once across gateways (sweeps, the expiry of
-- approvals, the evaluation queue). Each job has at most one leader, the
-- gateway that holds its row until expires (the database's clock); the
-- leader renews it while it runs, and another gateway takes the job once a
-- dead leader's term ran out.
CREATE TABLE job_leaders (
    job     text PRIMARY KEY,
    gateway text NOT NULL,
    expires timestamptz NOT NULL
);
