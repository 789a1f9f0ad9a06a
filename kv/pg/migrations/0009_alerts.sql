-- Version 9: budget alerts (app_docs, bucket alerts, one document per
-- alert, keyed by its id). The database keeps the rule the gateway keeps
-- in each settlement: one alert per mandate, budget (a window, or the
-- total) and threshold, whichever gateway's settlement reached it. An
-- alert's key is its id. Webhooks and their deliveries (buckets webhooks
-- and alert_outbox) are plain documents.
CREATE UNIQUE INDEX alerts_once ON app_docs ((doc ->> 'mandate'), (doc ->> 'budget'), (coalesce(doc ->> 'window', '')), (doc ->> 'threshold'))
    WHERE bucket = 'alerts';
ALTER TABLE app_docs ADD CONSTRAINT alerts_keyed_by_id CHECK (bucket <> 'alerts' OR doc ->> 'id' = key);
