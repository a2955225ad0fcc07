-- The transactional outbox and the step journal. An outbox tool's operation commits `queued`
-- with its one event (`toolgate_outbox`, keyed as the operation); a multi-step tool's steps are
-- journaled in `toolgate_steps`; a tool whose steps did not all succeed ends `partial`. Both
-- tables go with their operation (purge deletes the operation; ON DELETE CASCADE the rest).
ALTER TABLE toolgate_operations DROP CONSTRAINT toolgate_operations_state_check;
ALTER TABLE toolgate_operations ADD CONSTRAINT toolgate_operations_state_check
    CHECK (state IN ('processing', 'succeeded', 'failed', 'outcome_unknown',
                     'awaiting_approval', 'rejected', 'queued', 'partial'));

-- One event an operation at most, under the operation's own (tenant, key).
CREATE TABLE toolgate_outbox (
    tenant_id       TEXT COLLATE "C" NOT NULL,
    idempotency_key TEXT COLLATE "C" NOT NULL,
    tool            TEXT NOT NULL,
    -- What the worker delivers, as JSON text.
    payload         TEXT NOT NULL,
    status          TEXT NOT NULL
        CHECK (status IN ('pending', 'leased', 'delivered', 'dead', 'unknown')),
    attempt         BIGINT NOT NULL DEFAULT 0 CHECK (attempt BETWEEN 0 AND 4294967295),
    resumed_at      BIGINT NOT NULL DEFAULT 0 CHECK (resumed_at BETWEEN 0 AND 4294967295),
    lease_until_ms  BIGINT NOT NULL DEFAULT 0,
    due_ms          BIGINT NOT NULL,
    worker          JSON CHECK (json_typeof(worker) = 'string'),
    -- The last delivery error, {"attempt", "kind", "what"}, as written (json keeps a NUL).
    last_error      JSON CHECK (json_typeof(last_error) = 'object'),
    result          TEXT,
    created_ms      BIGINT NOT NULL,
    updated_ms      BIGINT NOT NULL,
    PRIMARY KEY (tenant_id, idempotency_key),
    FOREIGN KEY (tenant_id, idempotency_key)
        REFERENCES toolgate_operations (tenant_id, idempotency_key) ON DELETE CASCADE
);

-- lease_events: the events a worker may lease, oldest first.
CREATE INDEX toolgate_outbox_due
    ON toolgate_outbox (created_ms, tenant_id, idempotency_key)
    WHERE status IN ('pending', 'leased');
-- list_events: oldest first.
CREATE INDEX toolgate_outbox_by_creation
    ON toolgate_outbox (created_ms, tenant_id, idempotency_key);

-- The steps of an operation, by name; seq orders them as they were first begun.
CREATE TABLE toolgate_steps (
    tenant_id       TEXT COLLATE "C" NOT NULL,
    idempotency_key TEXT COLLATE "C" NOT NULL,
    name            TEXT COLLATE "C" NOT NULL,
    seq             BIGINT NOT NULL CHECK (seq BETWEEN 1 AND 4294967295),
    status          TEXT NOT NULL CHECK (status IN ('started', 'succeeded', 'failed')),
    attempt         BIGINT NOT NULL CHECK (attempt BETWEEN 0 AND 4294967295),
    output          TEXT,
    error           JSON CHECK (json_typeof(error) = 'object'),
    updated_ms      BIGINT NOT NULL,
    PRIMARY KEY (tenant_id, idempotency_key, name),
    FOREIGN KEY (tenant_id, idempotency_key)
        REFERENCES toolgate_operations (tenant_id, idempotency_key) ON DELETE CASCADE
);
