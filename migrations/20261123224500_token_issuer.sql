-- Which token issued each token. CreateToken records the admin token it was called with, so a
-- token can be traced to its issuer (and the issuer's limits, expiry and agent binding, which
-- the child cannot exceed). NULL for tokens created outside the API (seed, dev) and for every
-- token created before this migration.

-- Target of the composite key below: an issuer must be a token of the same org.
ALTER TABLE tokens ADD CONSTRAINT tokens_org_token UNIQUE (org_id, token_id);

ALTER TABLE tokens ADD COLUMN issuer_token_id uuid;
ALTER TABLE tokens ADD CONSTRAINT tokens_issuer_in_org
    FOREIGN KEY (org_id, issuer_token_id) REFERENCES tokens (org_id, token_id);

GRANT SELECT (issuer_token_id) ON tokens TO svc_app;
