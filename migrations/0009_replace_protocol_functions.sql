-- The data-plane functions of 0008 again, without calls of helper
-- functions on their hot path: argument bounds are checked by inline
-- expressions, and advisory lock keys computed inline (the same key as
-- `connreg.lock_key` and the backend's `postgres::lock_key`: the first four
-- bytes of the identifier's MD5). A SQL function with a `SET` clause is
-- never inlined, so each call of `lock_key` or `check_text` paid a function
-- call and its configuration switch; together they made a resolve about a
-- third slower than the decision itself warrants. Behaviour, answers,
-- owners and grants are unchanged (`CREATE OR REPLACE` keeps them).

CREATE OR REPLACE FUNCTION connreg.data_route_resolve(
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
    PERFORM pg_advisory_xact_lock(1668182530, ('x' || left(md5(p_action), 8))::bit(32)::integer);
    LOCK TABLE connreg.catalog_lock IN ROW SHARE MODE;
    PERFORM set_config('lock_timeout', '1000', true);
    RETURN QUERY SELECT * FROM connreg.route_decide(
        p_action, p_tenant, p_capability, p_now_ms, p_capacity_class,
        coalesce(p_cross_region_allowed, false), p_region, p_zone, 8, 1, 16,
        coalesce(p_commit_order, false));
    PERFORM set_config('lock_timeout', v_lock_timeout, true);
END
$$;

CREATE OR REPLACE FUNCTION connreg.data_route_settle(
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
    IF v_action IS NULL OR octet_length(v_action) NOT BETWEEN 1 AND 128 THEN
        RAISE EXCEPTION USING ERRCODE = '22023',
            MESSAGE = 'action must be 1 to 128 bytes';
    END IF;
    IF v_replica IS NULL OR octet_length(v_replica) NOT BETWEEN 1 AND 128 THEN
        RAISE EXCEPTION USING ERRCODE = '22023',
            MESSAGE = 'replica must be 1 to 128 bytes';
    END IF;
    IF p_outcome IS NULL
       OR p_outcome NOT IN ('completed', 'outcome_unknown', 'cancelled', 'lease_expired') THEN
        RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = 'unknown settlement outcome';
    END IF;
    IF p_circuit_threshold IS NULL OR p_circuit_threshold NOT BETWEEN 1 AND 1000 THEN
        RAISE EXCEPTION USING ERRCODE = '22023',
            MESSAGE = 'circuit threshold must be 1 to 1000';
    END IF;
    PERFORM pg_advisory_xact_lock(1668182530, ('x' || left(md5(v_action), 8))::bit(32)::integer);
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

CREATE OR REPLACE FUNCTION connreg.data_replica_register(
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
    IF p_replica IS NULL OR octet_length(p_replica) NOT BETWEEN 1 AND 128 THEN
        RAISE EXCEPTION USING ERRCODE = '22023',
            MESSAGE = 'replica must be 1 to 128 bytes';
    END IF;
    IF p_instance IS NULL OR octet_length(p_instance) NOT BETWEEN 1 AND 128 THEN
        RAISE EXCEPTION USING ERRCODE = '22023',
            MESSAGE = 'instance must be 1 to 128 bytes';
    END IF;
    IF p_version IS NULL OR octet_length(p_version) NOT BETWEEN 1 AND 128 THEN
        RAISE EXCEPTION USING ERRCODE = '22023',
            MESSAGE = 'version must be 1 to 128 bytes';
    END IF;
    IF p_endpoint IS NULL OR octet_length(p_endpoint) NOT BETWEEN 1 AND 512 THEN
        RAISE EXCEPTION USING ERRCODE = '22023',
            MESSAGE = 'endpoint must be 1 to 512 bytes';
    END IF;
    IF p_peer_identity IS NULL OR octet_length(p_peer_identity) NOT BETWEEN 1 AND 512 THEN
        RAISE EXCEPTION USING ERRCODE = '22023',
            MESSAGE = 'peer identity must be 1 to 512 bytes';
    END IF;
    IF p_region IS NULL OR octet_length(p_region) NOT BETWEEN 1 AND 128 THEN
        RAISE EXCEPTION USING ERRCODE = '22023',
            MESSAGE = 'region must be 1 to 128 bytes';
    END IF;
    IF p_zone IS NULL OR octet_length(p_zone) NOT BETWEEN 1 AND 128 THEN
        RAISE EXCEPTION USING ERRCODE = '22023',
            MESSAGE = 'zone must be 1 to 128 bytes';
    END IF;
    IF p_capacity_class IS NULL OR octet_length(p_capacity_class) NOT BETWEEN 1 AND 128 THEN
        RAISE EXCEPTION USING ERRCODE = '22023',
            MESSAGE = 'capacity class must be 1 to 128 bytes';
    END IF;
    IF p_health_seq IS NULL OR p_health_seq < 0
       OR p_lease_expires_at_ms IS NULL OR p_lease_expires_at_ms < 0 THEN
        RAISE EXCEPTION USING ERRCODE = '22023',
            MESSAGE = 'health sequence and lease must be at least 0';
    END IF;
    PERFORM pg_advisory_xact_lock(1668182531, ('x' || left(md5(p_instance), 8))::bit(32)::integer);
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

CREATE OR REPLACE FUNCTION connreg.data_replica_heartbeat(
    p_replica text, p_health_seq bigint, p_lease_expires_at_ms bigint)
RETURNS text
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, connreg, pg_temp
AS $$
DECLARE
    v_state text;
    v_seq bigint;
BEGIN
    IF p_replica IS NULL OR octet_length(p_replica) NOT BETWEEN 1 AND 128 THEN
        RAISE EXCEPTION USING ERRCODE = '22023',
            MESSAGE = 'replica must be 1 to 128 bytes';
    END IF;
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

CREATE OR REPLACE FUNCTION connreg.data_replica_drain(p_replica text) RETURNS jsonb
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, connreg, pg_temp
AS $$
DECLARE
    v_stored connreg.replicas;
BEGIN
    IF p_replica IS NULL OR octet_length(p_replica) NOT BETWEEN 1 AND 128 THEN
        RAISE EXCEPTION USING ERRCODE = '22023',
            MESSAGE = 'replica must be 1 to 128 bytes';
    END IF;
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

-- No function uses it any more.
DROP FUNCTION connreg.check_text(text, text, integer);

UPDATE connreg.schema_version SET version = 9;
