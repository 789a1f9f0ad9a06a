-- Version 3: each call in flight names the gateway that holds it (its
-- store handle's id in gateways), so that a gateway closes only the calls
-- of gateways that stopped or whose lease ran out. NULL: no running
-- gateway's (a hold loaded from a backup).
ALTER TABLE holds ADD COLUMN gateway text;
