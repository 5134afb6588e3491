-- Revoking a token revokes the tokens it issued, transitively: the walk down the issuer tree
-- reads children by issuer within one org.
CREATE INDEX tokens_org_issuer ON tokens (org_id, issuer_token_id)
    WHERE issuer_token_id IS NOT NULL;
