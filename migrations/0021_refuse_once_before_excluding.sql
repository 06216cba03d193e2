-- Two corrections to the new-route path of 0018's decision round, edited
-- where the round is stored (0019 and 0020 edited other lines of it):
--
-- * A binding whose counters had no room when counted is tried again on a
--   fresh candidate read before it is excluded. The count may have waited
--   (up to ROUTE_ROW_WAIT_MS) past a release, and a scope it shares with
--   the next binding is full for that one too, so the fresh read decides
--   (a PostgreSQL swarm run of the hot-tenant scenario, 0023 seed 18,
--   created on a lower-priority binding where the reference took the
--   first). The round's bound grows by one pass per binding refused.
-- * The counters' room is read by a correlated lookup of each counter's
--   limit instead of a join, so the statement takes one index path
--   whatever the plan.
--
-- Every edit must find the replaced text exactly once.

DO $edit$
DECLARE
    v_def text := pg_get_functiondef('connreg.route_decide_round(text, text, text, bigint, '
        'text, boolean, text, text, integer, integer, integer, boolean)'::regprocedure);
    v_edits text[][] := ARRAY[
        [$old$    v_excluded text[] := '{}';   -- bindings whose scopes had no room
$old$, $new$    v_excluded text[] := '{}';   -- bindings whose scopes had no room
    v_refused text[] := '{}';    -- bindings refused once for room
$new$],
        [$old$            -- Bounded: each pass excludes a binding, skips a replica (at
            -- most 16), or ends the round.
            v_rounds := v_rounds + 1;
            IF v_rounds > p_excluded_max + 16 + 2 THEN
$old$, $new$            -- Bounded: each pass refuses a binding once, excludes one,
            -- skips a replica (at most 16), or ends the round.
            v_rounds := v_rounds + 1;
            IF v_rounds > 2 * p_excluded_max + 16 + 2 THEN
$new$],
        [$old$                      FROM connreg.admission_scopes s
                     WHERE c.scope_id = ANY (v_scopes) AND s.scope_id = c.scope_id
                       AND c.in_use < s.scope_limit;
$old$, $new$                     WHERE c.scope_id = ANY (v_scopes)
                       AND c.in_use < (SELECT s.scope_limit FROM connreg.admission_scopes s
                                        WHERE s.scope_id = c.scope_id);
$new$],
        [$old$                    -- The room the filter saw was taken meanwhile: this
                    -- binding is out, as if its scopes had been full; the
                    -- rollback released its counters and any replica.
$old$, $new$                    -- The room the filter saw was taken meanwhile (the
                    -- rollback released its counters and any replica).
                    -- The first time, the candidates are read again: a
                    -- wait for a counter may have outlasted a release, and
                    -- a scope the next binding shares is full for it too,
                    -- so the fresh read decides. The second time, this
                    -- binding is out, as if its scopes had been full.
                    IF NOT (cand.binding_id = ANY (v_refused)) THEN
                        v_refused := v_refused || cand.binding_id;
                        CONTINUE;
                    END IF;
$new$]];
BEGIN
    FOR i IN 1..array_length(v_edits, 1) LOOP
        IF cardinality(string_to_array(v_def, v_edits[i][1])) <> 2 THEN
            RAISE EXCEPTION 'route_decide_round is not as 0020 left it (edit %)', i;
        END IF;
        v_def := replace(v_def, v_edits[i][1], v_edits[i][2]);
    END LOOP;
    EXECUTE v_def;
END
$edit$;

UPDATE connreg.schema_version SET version = 21;
