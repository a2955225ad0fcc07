-- One record per (tenant, idempotency key): the operation state machine of DESIGN §4.
-- Keys and tenants compare byte by byte (COLLATE "C"), whatever the database's locale, so that
-- every store lists records in the same order.
CREATE TABLE toolgate_operations (
    tenant_id       TEXT COLLATE "C" NOT NULL,
    idempotency_key TEXT COLLATE "C" NOT NULL,
    tool            TEXT NOT NULL,
    request_hash    TEXT NOT NULL,
    arguments       TEXT NOT NULL,
    state           TEXT NOT NULL
        CHECK (state IN ('processing', 'succeeded', 'failed', 'outcome_unknown')),
    attempt         BIGINT NOT NULL CHECK (attempt >= 1),
    lease_until_ms  BIGINT NOT NULL,
    result          TEXT,
    errors          JSONB NOT NULL DEFAULT '[]'::jsonb CHECK (jsonb_typeof(errors) = 'array'),
    reconcile_tries BIGINT NOT NULL DEFAULT 0 CHECK (reconcile_tries >= 0),
    created_ms      BIGINT NOT NULL,
    updated_ms      BIGINT NOT NULL,
    PRIMARY KEY (tenant_id, idempotency_key)
);

-- expire_leases: live claims by lease.
CREATE INDEX toolgate_operations_processing
    ON toolgate_operations (lease_until_ms) WHERE state = 'processing';

-- list_unknown: the reconciler's queue, oldest first.
CREATE INDEX toolgate_operations_unknown
    ON toolgate_operations (updated_ms, tenant_id, idempotency_key)
    WHERE state = 'outcome_unknown';

-- purge: settled records by age.
CREATE INDEX toolgate_operations_settled
    ON toolgate_operations (updated_ms) WHERE state IN ('succeeded', 'failed');
