-- Version 7: budgets that renew by calendar window. A mandate's spent and
-- reserved in each of its windows (win: the window's key, such as
-- day:2026-12-02), and the window a call in flight reserved in. As with
-- budgets since version 2, the gateway keeps the reference to the mandate.
CREATE TABLE budget_windows (
    mandate  text NOT NULL,
    win      text NOT NULL CHECK (win <> ''),
    spent    numeric(20,6) NOT NULL CHECK (spent >= 0),
    reserved numeric(20,6) NOT NULL CHECK (reserved >= 0),
    PRIMARY KEY (mandate, win)
);
ALTER TABLE holds ADD COLUMN budget_window text;
