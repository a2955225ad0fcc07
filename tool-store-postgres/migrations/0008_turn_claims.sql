-- A write's claim that begins its turn, in one statement (toolgate-core's
-- `OperationStore::begin_turn_and_claim`): the turn of a lone write costs two commits, its claim
-- and its outcome, not three.
--
-- `toolgate_count_turn` is the body of `toolgate_begin_turn` (migration 0007) without its relaxed
-- commit: the statement that claims a key must commit as every claim does, waiting for the
-- disk, before the write runs. `toolgate_begin_turn` keeps its relaxed commit and counts the
-- turn with `toolgate_count_turn`, so the rules stand in one place.

CREATE FUNCTION toolgate_count_turn(
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

-- As in migration 0007, its body now in `toolgate_count_turn`.
CREATE OR REPLACE FUNCTION toolgate_begin_turn(
    p_tenant TEXT, p_run TEXT, p_tools TEXT[], p_calls BIGINT[],
    p_max_steps BIGINT, p_max_tool_calls BIGINT, p_retry_budget BIGINT, p_now_ms BIGINT,
    OUT outcome TEXT, OUT step BIGINT, OUT used BIGINT, OUT aborted_kind TEXT,
    OUT aborted_reason TEXT, OUT granted BIGINT[], OUT failed_tools TEXT[],
    OUT failed_hashes TEXT[])
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM set_config('synchronous_commit', 'off', true);
    SELECT c.outcome, c.step, c.used, c.aborted_kind, c.aborted_reason, c.granted,
           c.failed_tools, c.failed_hashes
    INTO outcome, step, used, aborted_kind, aborted_reason, granted, failed_tools, failed_hashes
    FROM toolgate_count_turn(p_tenant, p_run, p_tools, p_calls, p_max_steps, p_max_tool_calls,
                             p_retry_budget, p_now_ms) AS c;
END
$$;
