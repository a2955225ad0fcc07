-- Approvals and the audit trail. An operation over its tool's approval threshold is stored
-- `awaiting_approval` (attempt 0 until it first runs) with its latest approval's id; a rejected,
-- expired or revalidation-refused one is `rejected`. Free text a model or a person wrote (call
-- ids, reasons, actors, tool names as sent) is kept as a JSON string, which keeps every
-- character (text refuses NUL), as the operations' errors are.
ALTER TABLE toolgate_operations DROP CONSTRAINT toolgate_operations_state_check;
ALTER TABLE toolgate_operations ADD CONSTRAINT toolgate_operations_state_check
    CHECK (state IN ('processing', 'succeeded', 'failed', 'outcome_unknown',
                     'awaiting_approval', 'rejected'));
ALTER TABLE toolgate_operations DROP CONSTRAINT toolgate_operations_attempt_check;
ALTER TABLE toolgate_operations ADD CONSTRAINT toolgate_operations_attempt_check
    CHECK (attempt >= 0);
ALTER TABLE toolgate_operations ADD COLUMN approval_id TEXT COLLATE "C";

-- purge: settled records by age, rejected ones now among them.
DROP INDEX toolgate_operations_settled;
CREATE INDEX toolgate_operations_settled
    ON toolgate_operations (updated_ms) WHERE state IN ('succeeded', 'failed', 'rejected');

-- One row an approval. Its operation is (tenant_id, idempotency_key); every change to an
-- approval is made holding the lock of its operation's row, taken first.
CREATE TABLE toolgate_approvals (
    id                  TEXT COLLATE "C" PRIMARY KEY,
    tenant_id           TEXT COLLATE "C" NOT NULL,
    idempotency_key     TEXT COLLATE "C" NOT NULL,
    tool                TEXT NOT NULL,
    request_hash        TEXT NOT NULL,
    policy_hash         TEXT NOT NULL,
    arguments           TEXT NOT NULL,
    amount              TEXT NOT NULL,
    threshold           TEXT NOT NULL,
    -- {"user": …, "permissions": […]}, as the requester was when the call was made.
    requester           JSON NOT NULL CHECK (json_typeof(requester) = 'object'),
    run_id              TEXT COLLATE "C" NOT NULL,
    call_id             JSON NOT NULL CHECK (json_typeof(call_id) = 'string'),
    approver_permission TEXT NOT NULL,
    created_ms          BIGINT NOT NULL,
    expires_ms          BIGINT NOT NULL,
    status              TEXT NOT NULL CHECK (status IN ('pending', 'approved', 'rejected')),
    -- Every decision, in order: [{"verdict", "by", "at_ms", "reason"}, …].
    decisions           JSON NOT NULL DEFAULT '[]'::json CHECK (json_typeof(decisions) = 'array')
);

-- list_approvals: oldest first.
CREATE INDEX toolgate_approvals_by_creation ON toolgate_approvals (created_ms, id);
-- expire_approvals: pending ones by expiry.
CREATE INDEX toolgate_approvals_pending
    ON toolgate_approvals (expires_ms) WHERE status = 'pending';
-- list_approved: the runner's queue.
CREATE INDEX toolgate_approvals_approved
    ON toolgate_approvals (created_ms, id) WHERE status = 'approved';
-- purge: the approvals of an operation.
CREATE INDEX toolgate_approvals_of_operation
    ON toolgate_approvals (tenant_id, idempotency_key);

-- The audit trail: one row a call answered or a decision made, appended and never changed.
CREATE TABLE toolgate_audit (
    seq             BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    kind            TEXT NOT NULL CHECK (kind IN ('call', 'decision')),
    tenant_id       TEXT COLLATE "C" NOT NULL,
    run_id          TEXT COLLATE "C" NOT NULL,
    call_id         JSON NOT NULL CHECK (json_typeof(call_id) = 'string'),
    tool            JSON NOT NULL CHECK (json_typeof(tool) = 'string'),
    actor           JSON NOT NULL CHECK (json_typeof(actor) = 'string'),
    arguments       TEXT NOT NULL,
    attempts        BIGINT NOT NULL CHECK (attempts BETWEEN 0 AND 4294967295),
    duration_ms     BIGINT NOT NULL CHECK (duration_ms >= 0),
    outcome         TEXT NOT NULL,
    error_kind      TEXT,
    replayed        BOOLEAN NOT NULL,
    bytes           BIGINT NOT NULL CHECK (bytes >= 0),
    idempotency_key TEXT COLLATE "C",
    approval_id     TEXT COLLATE "C",
    reason          JSON CHECK (json_typeof(reason) = 'string'),
    at_ms           BIGINT NOT NULL
);

-- audit by run, and list_operations by run.
CREATE INDEX toolgate_audit_by_run ON toolgate_audit (run_id, seq);
-- audit by operation, and purge's check that an operation is gone.
CREATE INDEX toolgate_audit_by_operation
    ON toolgate_audit (idempotency_key, tenant_id) WHERE idempotency_key IS NOT NULL;
-- purge: records by age.
CREATE INDEX toolgate_audit_by_age ON toolgate_audit (at_ms);
