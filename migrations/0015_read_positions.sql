-- LOCK-5, ROUTE-3: every resolve answers a held route lock-free, and a
-- caller that observes commit order learns where such an answer falls in
-- that order.
--
-- Before this migration a caller that observed commit order (the
-- simulator's PostgreSQL tier) took the locked path even for a held route,
-- so the lock-free `existing` answer every deployment serves never ran
-- under a race, a fault or a checker. Now every resolve tries it first.
-- An answer read from a snapshot commits nothing, so it has no commit
-- sequence of its own; instead it carries the highest observed commit
-- its snapshot shows (`read_seq`), read in the same statement as the
-- route:
--
-- * `connreg.observed_commits`: one row per commit sequence taken,
--   inserted by the transaction that takes it, so a snapshot shows
--   exactly the observed commits that committed before it. Only an
--   observing caller takes sequences; a serving path writes nothing here.
-- * `connreg.commit_take()`: the next sequence, recorded there.
--   `data_commit_order` and `route_decide_round` take it instead of the
--   bare sequence; nothing else of `route_decide_round` changes.
-- * `data_read_position()`: the same for a read-only transaction of an
--   observing caller (route lookups, catalog pages and revisions), which
--   calls it after its read, in the read's snapshot.
-- * `data_route_resolve` returns `read_seq` and `read_unseen` (null but
--   for an observed lock-free `existing` answer: the highest commit the
--   snapshot shows, and the sequences below it, among the last 256, that
--   it does not) and takes the lock-free read whatever `p_commit_order`
--   says.

CREATE TABLE connreg.observed_commits (
    seq bigint PRIMARY KEY
);

CREATE FUNCTION connreg.commit_take() RETURNS bigint
LANGUAGE sql
SET search_path = pg_catalog, connreg, pg_temp
AS $$ INSERT INTO connreg.observed_commits (seq)
      VALUES (nextval('connreg.commit_order')) RETURNING seq $$;
REVOKE ALL ON FUNCTION connreg.commit_take() FROM PUBLIC;

CREATE OR REPLACE FUNCTION connreg.data_commit_order() RETURNS bigint
LANGUAGE sql SECURITY DEFINER
SET search_path = pg_catalog, connreg, pg_temp
AS $$ SELECT connreg.commit_take() $$;

-- `route_decide_round` as in 0014, its one sequence call replaced. The
-- definition is edited where it is stored, so the rest of it stays
-- exactly 0014's; the edit must find that call exactly once.
DO $$
DECLARE
    v_def text := pg_get_functiondef('connreg.route_decide_round(text, text, text, bigint, '
        'text, boolean, text, text, integer, integer, integer, boolean)'::regprocedure);
    v_from text := 'commit_seq := nextval(''connreg.commit_order'');';
BEGIN
    IF cardinality(string_to_array(v_def, v_from)) <> 2 THEN
        RAISE EXCEPTION 'route_decide_round does not take the commit order exactly once';
    END IF;
    EXECUTE replace(v_def, v_from, 'commit_seq := connreg.commit_take();');
END
$$;

-- LOCK-5: where a read falls in the commit order, for an observing
-- caller's read-only transaction (REPEATABLE READ: one snapshot for the
-- read and this): the highest observed commit the snapshot shows, and the
-- sequences below it, among the last 256, it does not.
CREATE FUNCTION connreg.data_read_position()
RETURNS TABLE (read_seq bigint, read_unseen bigint[])
LANGUAGE sql STABLE SECURITY DEFINER
SET search_path = pg_catalog, connreg, pg_temp
AS $$
    WITH seen AS (
        SELECT max(o.seq) AS top FROM connreg.observed_commits o
    ), unseen AS (
        SELECT array_agg(g.seq ORDER BY g.seq) AS seqs
          FROM seen, generate_series(greatest(seen.top - 255, 1), seen.top) AS g(seq)
         WHERE NOT EXISTS (SELECT 1 FROM connreg.observed_commits o WHERE o.seq = g.seq)
    )
    SELECT seen.top, coalesce(unseen.seqs, '{}') FROM seen, unseen
$$;
REVOKE ALL ON FUNCTION connreg.data_read_position() FROM PUBLIC;

DROP FUNCTION connreg.data_route_resolve(text, text, text, bigint, text, boolean, text, text,
    boolean);

-- ROUTE-2..ROUTE-7 as in 0013; the lock-free read on every path.
CREATE FUNCTION connreg.data_route_resolve(
    p_action text,
    p_tenant text,
    p_capability text,
    p_now_ms bigint,
    p_capacity_class text,
    p_cross_region_allowed boolean,
    p_region text,
    p_zone text,
    p_commit_order boolean)
RETURNS TABLE (
    outcome text,
    action_id text, tenant_id text, capability_id text,
    binding_id text, instance_id text, version_id text, type_id text, replica_id text,
    endpoint text, peer_identity text, region text, zone text,
    catalog_revision bigint, binding_priority bigint, policy_revision bigint,
    credential_ref text, credential_revision bigint,
    secret_provider_ref text, secret_provider_revision bigint,
    quota_policy_ref text, quota_policy_revision bigint, capacity_class text,
    fence bigint, attempt bigint, reserved boolean, last_settlement text,
    scopes text[], commit_seq bigint, read_seq bigint, read_unseen bigint[])
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, connreg, pg_temp
SET lock_timeout = 2500
AS $$
#variable_conflict use_column
DECLARE
    v_deadline timestamptz;
    v_wait jsonb;
    v_attempt integer := 1;
    v_left_ms integer;
    v_done boolean := false;
    v_message text;
BEGIN
    IF p_action IS NULL OR octet_length(p_action) NOT BETWEEN 1 AND 128 THEN
        RAISE EXCEPTION USING ERRCODE = '22023',
            MESSAGE = 'action must be 1 to 128 bytes';
    END IF;
    IF p_tenant IS NULL OR octet_length(p_tenant) NOT BETWEEN 1 AND 128 THEN
        RAISE EXCEPTION USING ERRCODE = '22023',
            MESSAGE = 'tenant must be 1 to 128 bytes';
    END IF;
    IF p_capability IS NULL OR octet_length(p_capability) NOT BETWEEN 1 AND 128 THEN
        RAISE EXCEPTION USING ERRCODE = '22023',
            MESSAGE = 'capability must be 1 to 128 bytes';
    END IF;
    IF p_capacity_class IS NULL OR octet_length(p_capacity_class) NOT BETWEEN 1 AND 128 THEN
        RAISE EXCEPTION USING ERRCODE = '22023',
            MESSAGE = 'capacity class must be 1 to 128 bytes';
    END IF;
    IF p_now_ms IS NULL OR p_now_ms < 0 THEN
        RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = 'now must be at least 0';
    END IF;
    -- A route that holds its reservation is answered as stored, without
    -- the action's and the catalog's locks (ROUTE-3), as a resolve that
    -- ran just before a concurrent release would answer. An observing
    -- caller gets the snapshot's place in the commit order with it.
    RETURN QUERY
    WITH seen AS (
        SELECT max(o.seq) AS top FROM connreg.observed_commits o WHERE p_commit_order
    ), unseen AS (
        -- The sequences below the highest seen that this snapshot does not
        -- show, within the last 256: commits still in progress when it
        -- was taken, and sequences whose transaction rolled back.
        SELECT array_agg(g.seq ORDER BY g.seq) AS seqs
          FROM seen, generate_series(greatest(seen.top - 255, 1), seen.top) AS g(seq)
         WHERE NOT EXISTS (SELECT 1 FROM connreg.observed_commits o WHERE o.seq = g.seq)
    )
    SELECT 'existing'::text, a.action_id, a.tenant_id, a.capability_id, a.binding_id,
           a.instance_id, a.version_id, a.type_id, a.replica_id, a.endpoint,
           a.peer_identity, a.region, a.zone, a.catalog_revision, a.binding_priority,
           a.policy_revision, a.credential_ref, a.credential_revision,
           a.secret_provider_ref, a.secret_provider_revision, a.quota_policy_ref,
           a.quota_policy_revision, a.capacity_class, a.fence, a.attempt, a.reserved,
           a.last_settlement, a.scopes, NULL::bigint, seen.top,
           coalesce(unseen.seqs, '{}')
      FROM connreg.routes a, seen, unseen
     WHERE a.action_id = p_action AND a.reserved
       AND a.tenant_id = p_tenant AND a.capability_id = p_capability;
    IF FOUND THEN
        RETURN;
    END IF;
    PERFORM connreg.protocol_lock(1668182530, p_action);
    v_deadline := clock_timestamp() + interval '2000 milliseconds';
    -- Bounded: every round but the last ends in a wait or a pause, and
    -- all of them within the deadline.
    FOR v_round IN 1..64 LOOP
        v_left_ms := floor(extract(epoch FROM v_deadline - clock_timestamp()) * 1000)::integer;
        EXIT WHEN v_left_ms <= 0;
        PERFORM set_config('lock_timeout', least(v_left_ms, 1000)::text, true);
        BEGIN
            IF v_wait IS NOT NULL THEN
                CASE v_wait->>'wait'
                WHEN 'counters' THEN
                    PERFORM 1 FROM connreg.admission_counters c
                      WHERE c.scope_id IN (SELECT jsonb_array_elements_text(v_wait->'scopes'))
                      ORDER BY c.scope_id FOR UPDATE;
                WHEN 'replica' THEN
                    PERFORM 1 FROM connreg.replicas r
                      WHERE r.replica_id = v_wait->>'replica' FOR UPDATE;
                WHEN 'route_replica' THEN
                    PERFORM 1 FROM connreg.replicas r
                      WHERE r.replica_id = v_wait->>'replica' FOR KEY SHARE;
                ELSE
                    -- A pause before the next attempt (ROUTE-6).
                    v_attempt := (v_wait->>'attempt')::integer;
                    PERFORM pg_sleep(least(1 * v_attempt, v_left_ms) / 1000.0);
                END CASE;
            END IF;
            LOCK TABLE connreg.catalog_lock IN ROW SHARE MODE;
            RETURN QUERY SELECT d.*, NULL::bigint, NULL::bigint[] FROM connreg.route_decide_round(
                p_action, p_tenant, p_capability, p_now_ms, p_capacity_class,
                coalesce(p_cross_region_allowed, false), p_region, p_zone,
                v_attempt, 8, 16, coalesce(p_commit_order, false)) d;
            v_done := true;
        EXCEPTION
            WHEN SQLSTATE 'CR010' THEN
                -- Rolled back: catalog lock, counters, replica rows.
                GET STACKED DIAGNOSTICS v_message = MESSAGE_TEXT;
                v_wait := v_message::jsonb;
            WHEN lock_not_available THEN
                -- A wait past its bound: contention past the limit.
                EXIT;
        END;
        EXIT WHEN v_done;
    END LOOP;
    IF NOT v_done THEN
        outcome := 'no_capacity';
        RETURN NEXT;
    END IF;
END
$$;
REVOKE ALL ON FUNCTION connreg.data_route_resolve(text, text, text, bigint, text, boolean,
    text, text, boolean) FROM PUBLIC;

-- As in 0013, with the observed commits: the protocol owner records them.
CREATE OR REPLACE FUNCTION connreg.install_protocol_owner(owner text) RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    f regprocedure;
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = owner AND NOT rolcanlogin) THEN
        RAISE EXCEPTION USING ERRCODE = '42704',
            MESSAGE = format('the protocol owner role %I is missing or can log in; '
                             'run create_roles', owner);
    END IF;
    EXECUTE format('REVOKE ALL ON ALL TABLES IN SCHEMA connreg FROM %I', owner);
    EXECUTE format('REVOKE ALL ON ALL SEQUENCES IN SCHEMA connreg FROM %I', owner);
    EXECUTE format('GRANT USAGE, CREATE ON SCHEMA connreg TO %I', owner);
    EXECUTE format('GRANT SELECT ON ALL TABLES IN SCHEMA connreg TO %I', owner);
    EXECUTE format('GRANT INSERT, UPDATE ON connreg.replicas, connreg.assignments TO %I',
        owner);
    EXECUTE format('GRANT UPDATE ON connreg.admission_counters, connreg.catalog_lock, '
                   'connreg.protocol_locks TO %I', owner);
    EXECUTE format('GRANT INSERT ON connreg.route_snapshots, connreg.observed_commits TO %I',
        owner);
    EXECUTE format('GRANT USAGE ON SEQUENCE connreg.fence_tokens, connreg.commit_order, '
                   'connreg.route_snapshots_snapshot_id_seq TO %I', owner);
    FOR f IN
        SELECT p.oid::regprocedure FROM pg_proc p
         WHERE p.pronamespace = 'connreg'::regnamespace
           AND p.proname IN ('route_decide_round', 'lock_scopes_with_room', 'take_scopes',
                             'take_scopes_nowait', 'protocol_lock', 'assignment_json',
                             'replica_json', 'commit_take')
    LOOP
        EXECUTE format('GRANT EXECUTE ON FUNCTION %s TO %I', f, owner);
    END LOOP;
    FOR f IN
        SELECT p.oid::regprocedure FROM pg_proc p
         WHERE p.pronamespace = 'connreg'::regnamespace AND p.proname LIKE 'data\_%'
    LOOP
        EXECUTE format('ALTER FUNCTION %s OWNER TO %I', f, owner);
    END LOOP;
    EXECUTE format('REVOKE CREATE ON SCHEMA connreg FROM %I', owner);
END
$$;
REVOKE ALL ON FUNCTION connreg.install_protocol_owner(text) FROM PUBLIC;

UPDATE connreg.schema_version SET version = 15;
