-- Version 28: each gateway's lease records whether its writer takes turns
-- under the writers' lock (HOLON_PG_TURNS=1) or overlaps with the others'
-- (the default), so that a gateway starting in one mode while another
-- runs in the other is refused: the two read the writers' log in
-- different ways, and neither would see all of the other's changes.
ALTER TABLE gateways ADD COLUMN turns boolean NOT NULL DEFAULT false;
