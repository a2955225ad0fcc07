-- The run ledger: one row a run (its counters and why it was aborted), one a tool the run has
-- called (its attempts), one a call that failed in the run. A run's rows are deleted with it.
-- Names compare byte by byte (COLLATE "C"), as in toolgate_operations. Counters are u32s.
CREATE TABLE toolgate_runs (
    tenant_id      TEXT COLLATE "C" NOT NULL,
    run_id         TEXT COLLATE "C" NOT NULL,
    steps          BIGINT NOT NULL DEFAULT 0 CHECK (steps BETWEEN 0 AND 4294967295),
    tool_calls     BIGINT NOT NULL DEFAULT 0 CHECK (tool_calls BETWEEN 0 AND 4294967295),
    -- The error kind's name and the reason, both or neither. The reason is a JSON string, so
    -- that it keeps every character (text refuses NUL), as the operations' errors do.
    aborted_kind   TEXT,
    aborted_reason JSON CHECK (json_typeof(aborted_reason) = 'string'),
    updated_ms     BIGINT NOT NULL,
    CHECK ((aborted_kind IS NULL) = (aborted_reason IS NULL)),
    PRIMARY KEY (tenant_id, run_id)
);

-- purge: runs by age.
CREATE INDEX toolgate_runs_by_age ON toolgate_runs (updated_ms);

CREATE TABLE toolgate_run_attempts (
    tenant_id TEXT COLLATE "C" NOT NULL,
    run_id    TEXT COLLATE "C" NOT NULL,
    tool      TEXT COLLATE "C" NOT NULL,
    attempts  BIGINT NOT NULL CHECK (attempts BETWEEN 0 AND 4294967295),
    PRIMARY KEY (tenant_id, run_id, tool),
    FOREIGN KEY (tenant_id, run_id) REFERENCES toolgate_runs (tenant_id, run_id)
        ON DELETE CASCADE
);

CREATE TABLE toolgate_run_failures (
    tenant_id    TEXT COLLATE "C" NOT NULL,
    run_id       TEXT COLLATE "C" NOT NULL,
    tool         TEXT COLLATE "C" NOT NULL,
    request_hash TEXT COLLATE "C" NOT NULL,
    PRIMARY KEY (tenant_id, run_id, tool, request_hash),
    FOREIGN KEY (tenant_id, run_id) REFERENCES toolgate_runs (tenant_id, run_id)
        ON DELETE CASCADE
);
