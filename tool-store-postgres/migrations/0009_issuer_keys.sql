-- The public keys of the issuers of operator tokens, per tenant, as JSON Web Keys (never a
-- secret): what an operator's token is checked against.
CREATE TABLE toolgate_issuer_keys (
    kid         TEXT    PRIMARY KEY,
    tenant_id   TEXT    NOT NULL,
    issuer      TEXT    NOT NULL,
    jwk         TEXT    NOT NULL,
    added_ms    BIGINT  NOT NULL,
    seq         BIGINT  GENERATED ALWAYS AS IDENTITY
);

CREATE INDEX toolgate_issuer_keys_by_tenant ON toolgate_issuer_keys (tenant_id, seq);
