-- What each call cost, in US micro-dollars, from the provider's usage and the model's price in
-- the gateway's registry; 0 for a model without a price (and for rows written before prices).
ALTER TABLE usage_ledger
    ADD COLUMN cost_usd_micros bigint NOT NULL DEFAULT 0 CHECK (cost_usd_micros >= 0);
