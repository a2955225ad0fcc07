-- The run ledger's changes as functions, so that each is one statement: one round trip and one
-- commit instead of a transaction of five to seven. Each follows the rules of toolgate-core's
-- `RunRecord` (`begin_turn`, `charge_attempt`), which the memory and SQLite stores apply in
-- Rust; the store's tests hold the three to the same answers.
--
-- Both lock the run's row first, creating it if it has none, in one statement (an
-- `INSERT … ON CONFLICT DO UPDATE … RETURNING`, atomic against a concurrent insert or delete of
-- the row), so processes sharing the database change one run one at a time and its counters
-- never pass a limit. Counters saturate at the u32 maximum, as in Rust.
--
-- Both commit without waiting for the WAL flush (`synchronous_commit` off for their
-- transaction only): they are as atomic and isolated as any transaction, and a crash of the
-- client loses nothing. The write-ahead log is flushed in order, so the next commit that waits
-- for the flush (a write's claim, which comes before its tool runs; a retry's record, before
-- the retry is sent) makes them durable too: no write runs on counters the disk does not hold.
-- What a crash of the server or its machine can lose is the counting of a turn that ran only
-- reads, written in the last moments before it (at most three times `wal_writer_delay`).

-- A turn begins: `tools` each once, with `calls[i]` calls of `tools[i]`; a NULL limit is none.
-- `outcome` is 'aborted' (nothing written but the lock), 'step_limit' (likewise),
-- 'call_limit' (the step counted, no call) or 'admitted' (the step, the calls and the attempts
-- granted counted; `granted[i]` for `tools[i]`, the failed calls of those tools listed).
CREATE FUNCTION toolgate_begin_turn(
    p_tenant TEXT, p_run TEXT, p_tools TEXT[], p_calls BIGINT[],
    p_max_steps BIGINT, p_max_tool_calls BIGINT, p_retry_budget BIGINT, p_now_ms BIGINT,
    OUT outcome TEXT, OUT step BIGINT, OUT used BIGINT, OUT aborted_kind TEXT,
    OUT aborted_reason TEXT, OUT granted BIGINT[], OUT failed_tools TEXT[],
    OUT failed_hashes TEXT[])
LANGUAGE plpgsql AS $$
DECLARE
    run_steps BIGINT;
    run_calls BIGINT;
    turn_calls BIGINT;
    spent BIGINT;
    grant_now BIGINT;
    i INT;
BEGIN
    PERFORM set_config('synchronous_commit', 'off', true);
    INSERT INTO toolgate_runs AS r (tenant_id, run_id, updated_ms)
    VALUES (p_tenant, p_run, p_now_ms)
    ON CONFLICT (tenant_id, run_id) DO UPDATE SET steps = r.steps
    RETURNING r.steps, r.tool_calls, r.aborted_kind, r.aborted_reason::text
    INTO run_steps, run_calls, aborted_kind, aborted_reason;
    IF aborted_kind IS NOT NULL THEN
        outcome := 'aborted';
        RETURN;
    END IF;
    IF p_max_steps IS NOT NULL AND run_steps >= p_max_steps THEN
        outcome := 'step_limit';
        RETURN;
    END IF;
    step := LEAST(run_steps + 1, 4294967295);
    SELECT LEAST(COALESCE(SUM(c), 0), 4294967295) INTO turn_calls FROM unnest(p_calls) AS c;
    IF p_max_tool_calls IS NOT NULL AND LEAST(run_calls + turn_calls, 4294967295) > p_max_tool_calls THEN
        UPDATE toolgate_runs SET steps = step, updated_ms = p_now_ms
        WHERE tenant_id = p_tenant AND run_id = p_run;
        outcome := 'call_limit';
        used := run_calls;
        RETURN;
    END IF;
    UPDATE toolgate_runs
    SET steps = step, tool_calls = LEAST(run_calls + turn_calls, 4294967295),
        updated_ms = p_now_ms
    WHERE tenant_id = p_tenant AND run_id = p_run;
    granted := ARRAY[]::BIGINT[];
    FOR i IN 1 .. COALESCE(array_length(p_tools, 1), 0) LOOP
        SELECT a.attempts INTO spent FROM toolgate_run_attempts AS a
        WHERE a.tenant_id = p_tenant AND a.run_id = p_run AND a.tool = p_tools[i];
        spent := COALESCE(spent, 0);
        grant_now := p_calls[i];
        IF p_retry_budget IS NOT NULL THEN
            grant_now := LEAST(grant_now, GREATEST(p_retry_budget - spent, 0));
        END IF;
        IF grant_now > 0 THEN
            INSERT INTO toolgate_run_attempts AS a (tenant_id, run_id, tool, attempts)
            VALUES (p_tenant, p_run, p_tools[i], LEAST(spent + grant_now, 4294967295))
            ON CONFLICT (tenant_id, run_id, tool) DO UPDATE SET attempts = excluded.attempts;
        END IF;
        granted := granted || grant_now;
    END LOOP;
    SELECT COALESCE(array_agg(f.tool ORDER BY f.tool, f.request_hash), ARRAY[]::TEXT[]),
           COALESCE(array_agg(f.request_hash ORDER BY f.tool, f.request_hash), ARRAY[]::TEXT[])
    INTO failed_tools, failed_hashes
    FROM toolgate_run_failures AS f
    WHERE f.tenant_id = p_tenant AND f.run_id = p_run AND f.tool = ANY (p_tools);
    outcome := 'admitted';
END
$$;

-- One more attempt of `tool`: false, with nothing written but the lock, when its budget (NULL
-- for none) is spent.
CREATE FUNCTION toolgate_charge_attempt(
    p_tenant TEXT, p_run TEXT, p_tool TEXT, p_retry_budget BIGINT, p_now_ms BIGINT)
RETURNS BOOLEAN
LANGUAGE plpgsql AS $$
DECLARE
    spent BIGINT;
BEGIN
    PERFORM set_config('synchronous_commit', 'off', true);
    INSERT INTO toolgate_runs AS r (tenant_id, run_id, updated_ms)
    VALUES (p_tenant, p_run, p_now_ms)
    ON CONFLICT (tenant_id, run_id) DO UPDATE SET steps = r.steps;
    SELECT a.attempts INTO spent FROM toolgate_run_attempts AS a
    WHERE a.tenant_id = p_tenant AND a.run_id = p_run AND a.tool = p_tool;
    spent := COALESCE(spent, 0);
    IF p_retry_budget IS NOT NULL AND spent >= p_retry_budget THEN
        RETURN FALSE;
    END IF;
    INSERT INTO toolgate_run_attempts AS a (tenant_id, run_id, tool, attempts)
    VALUES (p_tenant, p_run, p_tool, LEAST(spent + 1, 4294967295))
    ON CONFLICT (tenant_id, run_id, tool) DO UPDATE SET attempts = excluded.attempts;
    UPDATE toolgate_runs SET updated_ms = p_now_ms WHERE tenant_id = p_tenant AND run_id = p_run;
    RETURN TRUE;
END
$$;
