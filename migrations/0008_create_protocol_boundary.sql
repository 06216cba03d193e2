-- The data role calls the protocol and nothing else (AUTH-2, AUTH-6).
--
-- Every data-plane call becomes one `SECURITY DEFINER` function with a fixed
-- `search_path`: resolve, lookup and settlement of routes, registration,
-- heartbeats, draining, reading and lease maintenance of replicas, catalog
-- pages and revision, status. Each enforces the protocol's own checks
-- (tenant, binding and instance agree; fences come from the sequence only;
-- counters move only by a reservation or its release) and bounds its own
-- lock waits. `connreg.install_protocol_owner` hands them to a role that
-- cannot log in and holds only the table privileges they need;
-- `connreg.grant_data_role` then leaves the data role EXECUTE on them, and
-- SELECT on the schema version, and nothing else: no table or sequence
-- privilege, no other function.
--
-- The catalog lock moves from an advisory lock, which any session may
-- take, to a table lock on `connreg.catalog_lock`, which no session without
-- a privilege on that table can take: resolves hold it in ROW SHARE mode,
-- publications in EXCLUSIVE mode (the same conflicts as before: shared
-- holders never block each other). Catalog pages, the revision and status
-- are single statements, one snapshot each, and take no lock.
--
-- Operator acts leave the data plane: closing a circuit and reading the
-- audit log run as the control role (AUTH-7), which owns the audit table;
-- nobody else may change it.
--
-- Constants below equal the backend's limits (`connreg.data_protocol_limits`,
-- checked at start-up): action lock class 0x636e7202, instance lock class
-- 0x636e7203, `ROUTE_LOCK_WAIT_MS` 1000, `ROUTE_LOCK_ATTEMPTS_MAX` 8,
-- `ROUTE_LOCK_BACKOFF_MS_PER_ATTEMPT` 1, `TENANT_CAPABILITY_BINDINGS_MAX`
-- 16, `INSTANCE_REPLICAS_MAX` 1024, `LEASE_MAINTENANCE_BATCH_MAX` 1000,
-- `ID_BYTES_MAX` 128, `TEXT_BYTES_MAX` 512.
--
-- The decision time (`p_now_ms`) stays an input: it is the registry's
-- injected clock (LEASE-4), the one thing the data plane is trusted for.

CREATE FUNCTION connreg.data_protocol_limits(
    OUT action_lock_class integer, OUT instance_lock_class integer,
    OUT route_lock_wait_ms integer, OUT route_lock_attempts_max integer,
    OUT route_lock_backoff_ms_per_attempt integer,
    OUT tenant_capability_bindings_max integer, OUT instance_replicas_max integer,
    OUT lease_maintenance_batch_max integer, OUT id_bytes_max integer,
    OUT text_bytes_max integer)
LANGUAGE sql IMMUTABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$ SELECT 1668182530, 1668182531, 1000, 8, 1, 16, 1024, 1000, 128, 512 $$;

-- The key of an identifier: the first four bytes of its MD5, as the
-- backend computes it (`postgres::lock_key`).
CREATE FUNCTION connreg.lock_key(p_id text) RETURNS integer
LANGUAGE sql IMMUTABLE STRICT
SET search_path = pg_catalog, pg_temp
AS $$ SELECT ('x' || left(md5(p_id), 8))::bit(32)::integer $$;

-- The catalog lock: never holds a row, only ever locked.
CREATE TABLE connreg.catalog_lock ();

-- Refuses an identifier or text argument past its bound (bad input from a
-- caller that skipped the backend's own validation).
CREATE FUNCTION connreg.check_text(p_what text, p_value text, p_max integer) RETURNS void
LANGUAGE plpgsql IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF p_value IS NULL OR p_value = '' OR octet_length(p_value) > p_max THEN
        RAISE EXCEPTION USING ERRCODE = '22023',
            MESSAGE = format('%s must be 1 to %s bytes', p_what, p_max);
    END IF;
END
$$;

-- The route columns a settlement compares (SETTLE-2), as JSON: the
-- assignment without its reservation state.
CREATE FUNCTION connreg.assignment_json(a connreg.assignments) RETURNS jsonb
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT jsonb_build_object(
        'action_id', a.action_id, 'tenant_id', a.tenant_id,
        'capability_id', a.capability_id, 'binding_id', a.binding_id,
        'instance_id', a.instance_id, 'version_id', a.version_id, 'type_id', a.type_id,
        'replica_id', a.replica_id, 'endpoint', a.endpoint,
        'peer_identity', a.peer_identity, 'region', a.region, 'zone', a.zone,
        'catalog_revision', a.catalog_revision, 'binding_priority', a.binding_priority,
        'policy_revision', a.policy_revision, 'credential_ref', a.credential_ref,
        'credential_revision', a.credential_revision,
        'secret_provider_ref', a.secret_provider_ref,
        'secret_provider_revision', a.secret_provider_revision,
        'quota_policy_ref', a.quota_policy_ref,
        'quota_policy_revision', a.quota_policy_revision,
        'capacity_class', a.capacity_class, 'fence', a.fence, 'attempt', a.attempt,
        'scopes', to_jsonb(ARRAY(SELECT s.scope_id FROM connreg.assignment_scopes s
                                 WHERE s.action_id = a.action_id ORDER BY s.scope_id)))
$$;

-- ROUTE-2..ROUTE-7, PIN-2..PIN-4: the whole resolve. The action's advisory
-- lock, then the catalog lock (shared), each waited for within the
-- session's `lock_timeout` (the data role's default bounds it, AUTH-8);
-- then the decision of migration 0007 with every wait bounded by the route
-- lock wait.
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
    scopes text[], commit_seq bigint)
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, connreg, pg_temp
AS $$
DECLARE
    v_lock_timeout text := current_setting('lock_timeout');
BEGIN
    PERFORM connreg.check_text('action', p_action, 128),
            connreg.check_text('tenant', p_tenant, 128),
            connreg.check_text('capability', p_capability, 128),
            connreg.check_text('capacity class', p_capacity_class, 128);
    IF p_now_ms IS NULL OR p_now_ms < 0 THEN
        RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = 'now must be at least 0';
    END IF;
    PERFORM pg_advisory_xact_lock(1668182530, connreg.lock_key(p_action));
    LOCK TABLE connreg.catalog_lock IN ROW SHARE MODE;
    PERFORM set_config('lock_timeout', '1000', true);
    RETURN QUERY SELECT * FROM connreg.route_decide(
        p_action, p_tenant, p_capability, p_now_ms, p_capacity_class,
        coalesce(p_cross_region_allowed, false), p_region, p_zone, 8, 1, 16,
        coalesce(p_commit_order, false));
    PERFORM set_config('lock_timeout', v_lock_timeout, true);
END
$$;

-- PIN-5, PIN-6: one action's route, only for its own tenant.
CREATE FUNCTION connreg.data_route_get(p_tenant text, p_action text)
RETURNS TABLE (
    action_id text, tenant_id text, capability_id text,
    binding_id text, instance_id text, version_id text, type_id text, replica_id text,
    endpoint text, peer_identity text, region text, zone text,
    catalog_revision bigint, binding_priority bigint, policy_revision bigint,
    credential_ref text, credential_revision bigint,
    secret_provider_ref text, secret_provider_revision bigint,
    quota_policy_ref text, quota_policy_revision bigint, capacity_class text,
    fence bigint, attempt bigint, reserved boolean, last_settlement text,
    scopes text[])
LANGUAGE sql STABLE SECURITY DEFINER
SET search_path = pg_catalog, connreg, pg_temp
AS $$
    SELECT a.action_id, a.tenant_id, a.capability_id, a.binding_id, a.instance_id,
           a.version_id, a.type_id, a.replica_id, a.endpoint, a.peer_identity, a.region,
           a.zone, a.catalog_revision, a.binding_priority, a.policy_revision,
           a.credential_ref, a.credential_revision, a.secret_provider_ref,
           a.secret_provider_revision, a.quota_policy_ref, a.quota_policy_revision,
           a.capacity_class, a.fence, a.attempt, a.reserved, a.last_settlement,
           ARRAY(SELECT s.scope_id FROM connreg.assignment_scopes s
                 WHERE s.action_id = a.action_id ORDER BY s.scope_id)
    FROM connreg.assignments a
    WHERE a.action_id = p_action AND a.tenant_id = p_tenant
$$;

-- SETTLE-1..SETTLE-5: releases the reservation of exactly the assignment
-- given (`assignment_json`), once. Lock order (LOCK-1): the action lock,
-- the replica row, the counters in scope order, the route's row. Answers
-- 'released', 'not_reserved' (already released: nothing changes) or
-- 'fence_lost' (no such route, or another assignment).
CREATE FUNCTION connreg.data_route_settle(
    p_given jsonb,
    p_outcome text,
    p_circuit_enabled boolean,
    p_circuit_threshold bigint)
RETURNS text
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, connreg, pg_temp
AS $$
DECLARE
    v_action text := p_given->>'action_id';
    v_replica text := p_given->>'replica_id';
    v_open boolean;
    v_unknown bigint;
    v_replica_found boolean;
    v_route connreg.assignments;
    v_scopes text[];
BEGIN
    PERFORM connreg.check_text('action', v_action, 128),
            connreg.check_text('replica', v_replica, 128);
    IF p_outcome IS NULL
       OR p_outcome NOT IN ('completed', 'outcome_unknown', 'cancelled', 'lease_expired') THEN
        RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = 'unknown settlement outcome';
    END IF;
    IF p_circuit_threshold IS NULL OR p_circuit_threshold NOT BETWEEN 1 AND 1000 THEN
        RAISE EXCEPTION USING ERRCODE = '22023',
            MESSAGE = 'circuit threshold must be 1 to 1000';
    END IF;
    PERFORM pg_advisory_xact_lock(1668182530, connreg.lock_key(v_action));
    SELECT r.circuit_open, r.consecutive_unknown INTO v_open, v_unknown
      FROM connreg.replicas r WHERE r.replica_id = v_replica FOR UPDATE;
    v_replica_found := FOUND;
    SELECT * INTO v_route FROM connreg.assignments a WHERE a.action_id = v_action;
    IF NOT FOUND OR connreg.assignment_json(v_route) IS DISTINCT FROM p_given THEN
        RETURN 'fence_lost';
    END IF;
    IF NOT v_route.reserved THEN
        RETURN 'not_reserved';
    END IF;
    IF NOT v_replica_found THEN
        RAISE EXCEPTION USING ERRCODE = 'XX000',
            MESSAGE = 'corrupt store: assignments.replica_id';
    END IF;
    IF p_outcome = 'completed' THEN
        v_unknown := 0;
    ELSIF p_outcome = 'outcome_unknown' AND coalesce(p_circuit_enabled, false) THEN
        v_unknown := least(v_unknown + 1, 4294967295);
        v_open := v_open OR v_unknown >= p_circuit_threshold;
    END IF;
    v_scopes := ARRAY(SELECT jsonb_array_elements_text(p_given->'scopes'));
    PERFORM 1 FROM connreg.admission_counters c
      WHERE c.scope_id = ANY(v_scopes) ORDER BY c.scope_id FOR UPDATE;
    UPDATE connreg.admission_counters c SET in_use = greatest(c.in_use - 1, 0)
     WHERE c.scope_id = ANY(v_scopes);
    UPDATE connreg.replicas r
       SET active = greatest(r.active - 1, 0), circuit_open = v_open,
           consecutive_unknown = v_unknown
     WHERE r.replica_id = v_replica;
    UPDATE connreg.assignments a SET reserved = false, last_settlement = p_outcome
     WHERE a.action_id = v_action;
    RETURN 'released';
END
$$;

-- The columns of one replica, for the functions below.
CREATE FUNCTION connreg.replica_json(r connreg.replicas) RETURNS jsonb
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT to_jsonb(r) $$;

-- LEASE-1: registers a provisioned replica, or brings an offline one back.
-- Serialized per instance (its replica count). Answers the outcome and the
-- replica: 'instance_not_found', 'version_not_found', 'conflict' (another
-- identity under this ID), 'limit' (replicas per instance), 'unchanged'
-- (an old sequence), 'registered'.
CREATE FUNCTION connreg.data_replica_register(
    p_replica text, p_instance text, p_version text, p_endpoint text,
    p_peer_identity text, p_region text, p_zone text, p_capacity_class text,
    p_capacity bigint, p_health_seq bigint, p_lease_expires_at_ms bigint)
RETURNS TABLE (outcome text, replica jsonb)
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, connreg, pg_temp
AS $$
DECLARE
    v_stored connreg.replicas;
    v_siblings bigint;
BEGIN
    PERFORM connreg.check_text('replica', p_replica, 128),
            connreg.check_text('instance', p_instance, 128),
            connreg.check_text('version', p_version, 128),
            connreg.check_text('endpoint', p_endpoint, 512),
            connreg.check_text('peer identity', p_peer_identity, 512),
            connreg.check_text('region', p_region, 128),
            connreg.check_text('zone', p_zone, 128),
            connreg.check_text('capacity class', p_capacity_class, 128);
    IF p_health_seq IS NULL OR p_health_seq < 0
       OR p_lease_expires_at_ms IS NULL OR p_lease_expires_at_ms < 0 THEN
        RAISE EXCEPTION USING ERRCODE = '22023',
            MESSAGE = 'health sequence and lease must be at least 0';
    END IF;
    PERFORM pg_advisory_xact_lock(1668182531, connreg.lock_key(p_instance));
    IF NOT EXISTS (SELECT 1 FROM connreg.instances i WHERE i.instance_id = p_instance) THEN
        RETURN QUERY SELECT 'instance_not_found', NULL::jsonb;
        RETURN;
    END IF;
    IF NOT EXISTS (SELECT 1 FROM connreg.connector_versions v
                   WHERE v.version_id = p_version) THEN
        RETURN QUERY SELECT 'version_not_found', NULL::jsonb;
        RETURN;
    END IF;
    SELECT * INTO v_stored FROM connreg.replicas r WHERE r.replica_id = p_replica FOR UPDATE;
    IF FOUND THEN
        IF (v_stored.instance_id, v_stored.version_id, v_stored.endpoint,
            v_stored.peer_identity, v_stored.region, v_stored.zone,
            v_stored.capacity_class, v_stored.capacity)
           IS DISTINCT FROM
           (p_instance, p_version, p_endpoint, p_peer_identity, p_region, p_zone,
            p_capacity_class, p_capacity) THEN
            RETURN QUERY SELECT 'conflict', NULL::jsonb;
            RETURN;
        END IF;
        IF p_health_seq <= v_stored.health_seq THEN
            RETURN QUERY SELECT 'unchanged', connreg.replica_json(v_stored);
            RETURN;
        END IF;
        UPDATE connreg.replicas r
           SET health_seq = p_health_seq, lease_expires_at_ms = p_lease_expires_at_ms,
               state = 'ready'
         WHERE r.replica_id = p_replica
        RETURNING * INTO v_stored;
        RETURN QUERY SELECT 'registered', connreg.replica_json(v_stored);
        RETURN;
    END IF;
    SELECT count(*) INTO v_siblings FROM connreg.replicas r WHERE r.instance_id = p_instance;
    IF v_siblings >= 1024 THEN
        RETURN QUERY SELECT 'limit', NULL::jsonb;
        RETURN;
    END IF;
    INSERT INTO connreg.replicas AS r (replica_id, instance_id, version_id, endpoint,
        peer_identity, region, zone, capacity_class, capacity, health_seq,
        lease_expires_at_ms, active, state, circuit_open, consecutive_unknown)
    VALUES (p_replica, p_instance, p_version, p_endpoint, p_peer_identity, p_region, p_zone,
        p_capacity_class, p_capacity, p_health_seq, p_lease_expires_at_ms, 0, 'ready',
        false, 0)
    RETURNING * INTO v_stored;
    RETURN QUERY SELECT 'registered', connreg.replica_json(v_stored);
END
$$;

-- LEASE-1: a newer sequence advances the lease; an older one is ignored.
-- Answers 'not_found', 'offline', 'ignored' or 'applied'.
CREATE FUNCTION connreg.data_replica_heartbeat(
    p_replica text, p_health_seq bigint, p_lease_expires_at_ms bigint)
RETURNS text
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, connreg, pg_temp
AS $$
DECLARE
    v_state text;
    v_seq bigint;
BEGIN
    PERFORM connreg.check_text('replica', p_replica, 128);
    IF p_health_seq IS NULL OR p_lease_expires_at_ms IS NULL OR p_lease_expires_at_ms < 0 THEN
        RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = 'sequence and lease are required';
    END IF;
    SELECT r.state, r.health_seq INTO v_state, v_seq
      FROM connreg.replicas r WHERE r.replica_id = p_replica FOR UPDATE;
    IF NOT FOUND THEN
        RETURN 'not_found';
    END IF;
    IF v_state = 'offline' THEN
        RETURN 'offline';
    END IF;
    IF p_health_seq <= v_seq THEN
        RETURN 'ignored';
    END IF;
    UPDATE connreg.replicas r
       SET health_seq = p_health_seq, lease_expires_at_ms = p_lease_expires_at_ms
     WHERE r.replica_id = p_replica;
    RETURN 'applied';
END
$$;

-- Stops new routes to a replica; pinned retries still reach it. NULL when
-- there is no such replica.
CREATE FUNCTION connreg.data_replica_drain(p_replica text) RETURNS jsonb
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, connreg, pg_temp
AS $$
DECLARE
    v_stored connreg.replicas;
BEGIN
    PERFORM connreg.check_text('replica', p_replica, 128);
    UPDATE connreg.replicas r
       SET state = CASE WHEN r.state = 'ready' THEN 'draining' ELSE r.state END
     WHERE r.replica_id = p_replica
    RETURNING * INTO v_stored;
    IF NOT FOUND THEN
        RETURN NULL;
    END IF;
    RETURN connreg.replica_json(v_stored);
END
$$;

-- One replica, or NULL.
CREATE FUNCTION connreg.data_replica_get(p_replica text) RETURNS jsonb
LANGUAGE sql STABLE SECURITY DEFINER
SET search_path = pg_catalog, connreg, pg_temp
AS $$
    SELECT connreg.replica_json(r) FROM connreg.replicas r WHERE r.replica_id = p_replica
$$;

-- LEASE-2, LEASE-3: at most `p_max` expired replicas, oldest lease first,
-- skipping those other transactions hold, marked offline; their held
-- reservations released as lease_expired and the counts given back.
-- Lock order (LOCK-1): replica rows (never waiting), the assignments on
-- them, their counters in scope order.
CREATE FUNCTION connreg.data_lease_maintain(p_now_ms bigint, p_max integer)
RETURNS TABLE (expired text[], released bigint, more boolean)
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, connreg, pg_temp
AS $$
DECLARE
    v_expired text[];
    v_actions text[];
BEGIN
    IF p_now_ms IS NULL OR p_now_ms < 0 THEN
        RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = 'now must be at least 0';
    END IF;
    IF p_max IS NULL OR p_max NOT BETWEEN 1 AND 1000 THEN
        RAISE EXCEPTION USING ERRCODE = '22023',
            MESSAGE = 'maintenance batch must be 1 to 1000';
    END IF;
    v_expired := ARRAY(
        SELECT r.replica_id FROM connreg.replicas r
         WHERE r.state <> 'offline' AND r.lease_expires_at_ms <= p_now_ms
         ORDER BY r.lease_expires_at_ms, r.replica_id
         LIMIT p_max
         FOR UPDATE SKIP LOCKED);
    v_actions := ARRAY(
        SELECT a.action_id FROM connreg.assignments a
         WHERE a.reserved AND a.replica_id = ANY(v_expired)
         ORDER BY a.action_id
         FOR UPDATE);
    PERFORM 1 FROM connreg.admission_counters c
      WHERE c.scope_id IN (SELECT s.scope_id FROM connreg.assignment_scopes s
                            WHERE s.action_id = ANY(v_actions))
      ORDER BY c.scope_id FOR UPDATE;
    UPDATE connreg.admission_counters c SET in_use = greatest(c.in_use - d.n, 0)
      FROM (SELECT s.scope_id, count(*) AS n FROM connreg.assignment_scopes s
             WHERE s.action_id = ANY(v_actions) GROUP BY s.scope_id) d
     WHERE c.scope_id = d.scope_id;
    UPDATE connreg.replicas r SET state = 'offline', active = greatest(r.active - coalesce(d.n, 0), 0)
      FROM (SELECT e.replica_id, (SELECT count(*) FROM connreg.assignments a
                                   WHERE a.replica_id = e.replica_id
                                     AND a.action_id = ANY(v_actions)) AS n
              FROM unnest(v_expired) AS e(replica_id)) d
     WHERE r.replica_id = d.replica_id;
    UPDATE connreg.assignments a SET reserved = false, last_settlement = 'lease_expired'
     WHERE a.action_id = ANY(v_actions);
    RETURN QUERY SELECT v_expired, cardinality(v_actions)::bigint,
        EXISTS (SELECT 1 FROM connreg.replicas r
                 WHERE r.state <> 'offline' AND r.lease_expires_at_ms <= p_now_ms
                   AND r.replica_id <> ALL(v_expired));
END
$$;

-- LOCK-5: the next commit order, taken by a call whose caller observes
-- commit order, just before its transaction commits.
CREATE FUNCTION connreg.data_commit_order() RETURNS bigint
LANGUAGE sql SECURITY DEFINER
SET search_path = pg_catalog, connreg, pg_temp
AS $$ SELECT nextval('connreg.commit_order') $$;

-- CAT-4: the revision.
CREATE FUNCTION connreg.data_catalog_revision() RETURNS bigint
LANGUAGE sql STABLE SECURITY DEFINER
SET search_path = pg_catalog, connreg, pg_temp
AS $$ SELECT cs.revision FROM connreg.catalog_state cs $$;

-- CAT-4..CAT-10: one page of definitions and the revision it was read at,
-- in one statement, so one snapshot and one revision. A page with no
-- definitions is one row with the revision and NULLs. `p_tenant` NULL is
-- the internal read (any tenant; with `p_include_unbound`, CAT-6).
CREATE FUNCTION connreg.data_catalog_page(
    p_tenant text, p_after text, p_capability text, p_search text, p_profile text,
    p_include_unbound boolean, p_rows bigint)
RETURNS TABLE (revision bigint, capability_id text, summary text, schema_json text,
               active boolean)
LANGUAGE sql STABLE SECURITY DEFINER
SET search_path = pg_catalog, connreg, pg_temp
AS $$
    SELECT cs.revision, p.capability_id, p.summary, p.schema_json, p.active
    FROM connreg.catalog_state cs
    LEFT JOIN LATERAL (
        SELECT d.capability_id, d.summary, d.schema_json, d.active
        FROM connreg.capability_definitions d
        WHERE d.active
          AND (p_after IS NULL OR d.capability_id > p_after)
          AND (p_capability IS NULL OR d.capability_id = p_capability)
          AND (p_search IS NULL
               OR strpos(translate(d.capability_id, 'ABCDEFGHIJKLMNOPQRSTUVWXYZ',
                                   'abcdefghijklmnopqrstuvwxyz'), p_search) > 0
               OR strpos(translate(d.summary, 'ABCDEFGHIJKLMNOPQRSTUVWXYZ',
                                   'abcdefghijklmnopqrstuvwxyz'), p_search) > 0)
          AND (EXISTS (SELECT 1 FROM connreg.eligible_bindings e
                       WHERE e.capability_id = d.capability_id
                         AND (p_tenant IS NULL OR e.tenant_id = p_tenant)
                         AND (p_profile IS NULL
                              OR EXISTS (SELECT 1 FROM connreg.version_profiles vp
                                         WHERE vp.version_id = e.version_id
                                           AND vp.profile_id = p_profile)))
               OR (coalesce(p_include_unbound, false) AND p_tenant IS NULL
                   AND (p_profile IS NULL
                        OR EXISTS (SELECT 1 FROM connreg.version_capabilities vc
                                   JOIN connreg.connector_versions v
                                     ON v.version_id = vc.version_id
                                   JOIN connreg.connector_types t ON t.type_id = v.type_id
                                   JOIN connreg.version_profiles vp
                                     ON vp.version_id = v.version_id
                                    AND vp.profile_id = p_profile
                                   WHERE vc.capability_id = d.capability_id
                                     AND v.active AND v.qualified AND t.enabled))))
        ORDER BY d.capability_id
        LIMIT least(greatest(coalesce(p_rows, 1), 1), 501)
    ) p ON true
$$;

-- AUTH-5: aggregate status, one statement.
CREATE FUNCTION connreg.data_status(
    OUT revision bigint, OUT ready bigint, OUT draining bigint, OUT offline bigint,
    OUT open_circuits bigint, OUT active_assignments bigint, OUT assignments_total bigint)
LANGUAGE sql STABLE SECURITY DEFINER
SET search_path = pg_catalog, connreg, pg_temp
AS $$
    SELECT (SELECT cs.revision FROM connreg.catalog_state cs),
           count(*) FILTER (WHERE r.state = 'ready'),
           count(*) FILTER (WHERE r.state = 'draining'),
           count(*) FILTER (WHERE r.state = 'offline'),
           count(*) FILTER (WHERE r.circuit_open),
           (SELECT count(*) FROM connreg.assignments a WHERE a.reserved),
           (SELECT count(*) FROM connreg.assignments)
    FROM connreg.replicas r
$$;

-- The publication's catalog lock, exclusive, waiting in the queue at most
-- `p_wait_ms` (LOCK-4), now on the lock table. Runs as the control role,
-- which owns the table. False when not granted in time; the caller's
-- transaction stays usable and its `lock_timeout` is put back.
CREATE FUNCTION connreg.catalog_lock_exclusive(p_wait_ms integer) RETURNS boolean
LANGUAGE plpgsql
SET search_path = pg_catalog, connreg, pg_temp
AS $$
DECLARE
    v_lock_timeout text := current_setting('lock_timeout');
BEGIN
    PERFORM set_config('lock_timeout', p_wait_ms::text, true);
    BEGIN
        LOCK TABLE connreg.catalog_lock IN EXCLUSIVE MODE;
    EXCEPTION WHEN lock_not_available THEN
        PERFORM set_config('lock_timeout', v_lock_timeout, true);
        RETURN false;
    END;
    PERFORM set_config('lock_timeout', v_lock_timeout, true);
    RETURN true;
END
$$;

-- Hands the data-plane functions to `owner`, a role that cannot log in,
-- with exactly the table privileges they need. The control role runs it
-- after migrating and must be a member of `owner` (`create_roles` makes it
-- one). Idempotent.
CREATE FUNCTION connreg.install_protocol_owner(owner text) RETURNS void
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
    EXECUTE format('GRANT INSERT ON connreg.assignment_scopes TO %I', owner);
    EXECUTE format('GRANT UPDATE ON connreg.admission_counters, connreg.catalog_lock TO %I',
        owner);
    EXECUTE format('GRANT USAGE ON SEQUENCE connreg.fence_tokens, connreg.commit_order TO %I',
        owner);
    FOR f IN
        SELECT p.oid::regprocedure FROM pg_proc p
         WHERE p.pronamespace = 'connreg'::regnamespace
           AND p.proname IN ('route_decide', 'lock_scopes_with_room', 'reserve_scopes',
                             'lock_key', 'check_text', 'assignment_json', 'replica_json')
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

-- The data role's privileges: the data-plane functions, the schema
-- version, nothing else.
CREATE OR REPLACE FUNCTION connreg.grant_data_role(data_role text) RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    f regprocedure;
BEGIN
    EXECUTE format('REVOKE ALL ON ALL TABLES IN SCHEMA connreg FROM %I', data_role);
    EXECUTE format('REVOKE ALL ON ALL SEQUENCES IN SCHEMA connreg FROM %I', data_role);
    EXECUTE format('REVOKE ALL ON ALL FUNCTIONS IN SCHEMA connreg FROM %I', data_role);
    EXECUTE format('REVOKE ALL ON SCHEMA connreg FROM %I', data_role);

    EXECUTE format('GRANT USAGE ON SCHEMA connreg TO %I', data_role);
    EXECUTE format('GRANT SELECT ON connreg.schema_version TO %I', data_role);
    FOR f IN
        SELECT p.oid::regprocedure FROM pg_proc p
         WHERE p.pronamespace = 'connreg'::regnamespace
           AND p.proname LIKE 'data\_%'
    LOOP
        EXECUTE format('GRANT EXECUTE ON FUNCTION %s TO %I', f, data_role);
    END LOOP;
END
$$;
REVOKE ALL ON FUNCTION connreg.grant_data_role(text) FROM PUBLIC;

-- No function of the schema is anyone's by default.
REVOKE EXECUTE ON ALL FUNCTIONS IN SCHEMA connreg FROM PUBLIC;

UPDATE connreg.schema_version SET version = 8;
