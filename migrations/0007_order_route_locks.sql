-- Route resolution with one global lock order, and commit order.
--
-- Lock order, shared by every transaction of the backend (the Rust side
-- documents it in registry/src/postgres/routing.rs):
--
--   1. the action's advisory lock (resolve, settle);
--   2. the catalog's advisory lock (shared: resolve and reads; exclusive:
--      publication);
--   3. replica rows;
--   4. admission counter rows, several always in scope order;
--   5. assignment rows.
--
-- A transaction waits for a lock only while every row lock it holds comes
-- earlier in that order. The one lock taken against it, a replica row after
-- the chosen binding's counters in the resolve below, is taken with
-- SKIP LOCKED or NOWAIT: it never waits, so it closes no cycle. Lease
-- maintenance takes assignment rows before counters; that is safe because
-- every other writer of an assignment row holds its replica row first, and
-- maintenance holds that.
--
-- What changed from 0006:
--
-- * A candidate the resolve abandons is abandoned whole. The chosen
--   binding's counters and the replica row are taken inside a
--   subtransaction; a binding without room or a replica another decision
--   holds rolls it back, which releases both. Before, a binding without
--   room kept its counters and its replica row locked for the rest of the
--   decision, counters were no longer taken in scope order, and a settle,
--   a pinned retry or lease maintenance could close a cycle with it
--   (answered `Unavailable` after PostgreSQL's deadlock check).
-- * A resolve never holds a replica row while it waits for a counter:
--   the counters are waited for first (bounded by `p_wait_ms`), holding no
--   row, and the replica is then locked without waiting. A stalled counter
--   holder therefore delays only decisions that need that counter, never
--   heartbeats or settlements of the replicas those decisions would pick.
--   Only the last attempt, after the bounded retries, waits for its replica
--   row, and then in order: replica first, counters second.
-- * The pinned retry (PIN-3) takes its counters first, then its replica
--   with NOWAIT; if another transaction holds the replica it starts again
--   in order (replica, then counters), each wait bounded by `p_wait_ms`.
-- * Every wait past `p_wait_ms` is contention past the bounded limit:
--   `no_capacity` (ROUTE-6). A deadlock is no longer translated: with the
--   order above there is none, and one would surface as an error.
-- * `p_commit_order`: when true the function takes the next value of
--   `connreg.commit_order` as its last step on every outcome that commits
--   something (`created`, `reserved`) or reads the committed route
--   (`existing`), and answers it in `commit_seq`. Taken after every lock,
--   so two decisions that touch a common row get values in commit order.
--   The backend asks for it only when a harness observes commit order.

CREATE SEQUENCE connreg.commit_order AS bigint;

DROP FUNCTION connreg.route_resolve(text, text, text, bigint, text, boolean, text, text,
    integer, integer, integer, integer, integer, integer, integer, integer);

-- The decision itself, under the locks `route_resolve` took. One row out.
CREATE FUNCTION connreg.route_decide(
    p_action text,
    p_tenant text,
    p_capability text,
    p_now_ms bigint,
    p_capacity_class text,
    p_cross_region_allowed boolean,
    p_region text,
    p_zone text,
    p_attempts_max integer,
    p_backoff_ms_per_attempt integer,
    p_excluded_max integer,
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
LANGUAGE plpgsql
AS $$
#variable_conflict use_column
DECLARE
    v_revision bigint;
    v_tenant text;
    v_capability text;
    v_reserved boolean;
    v_replica text;
    v_version text;
    v_type text;
    v_scopes text[];
    v_usable boolean;
    v_room boolean;
    v_stage text;
    v_excluded text[] := '{}';   -- bindings whose scopes had no room
    v_busy text[] := '{}';       -- bindings whose every replica was held, this attempt
    v_attempt integer := 1;
    v_rounds integer := 0;
    v_waiting boolean := false;
    cand record;
    pick record;
BEGIN
    SELECT cs.revision INTO v_revision FROM connreg.catalog_state cs;

    SELECT a.tenant_id, a.capability_id, a.reserved, a.replica_id, a.version_id, a.type_id,
           ARRAY(SELECT s.scope_id FROM connreg.assignment_scopes s
                  WHERE s.action_id = a.action_id ORDER BY s.scope_id)
      INTO v_tenant, v_capability, v_reserved, v_replica, v_version, v_type, v_scopes
      FROM connreg.assignments a
     WHERE a.action_id = p_action;
    IF FOUND THEN
        -- ROUTE-4: other coordinates reveal nothing of the route.
        IF v_tenant <> p_tenant OR v_capability <> p_capability THEN
            outcome := 'conflict';
            RETURN NEXT;
            RETURN;
        END IF;
        IF v_reserved THEN
            outcome := 'existing';
        ELSE
            -- PIN-3: the same replica and scopes again, or nothing (PIN-4).
            -- First without locks: a replica that cannot serve answers
            -- replica_unavailable whatever the counters say.
            SELECT r.state IN ('ready', 'draining') AND r.lease_expires_at_ms > p_now_ms
                       AND r.version_id = v_version AND NOT r.circuit_open
              INTO v_usable
              FROM connreg.replicas r
             WHERE r.replica_id = v_replica;
            IF NOT FOUND OR NOT v_usable
               OR NOT COALESCE((SELECT v.active AND v.qualified FROM connreg.connector_versions v
                                 WHERE v.version_id = v_version), false)
               OR NOT COALESCE((SELECT t.enabled FROM connreg.connector_types t
                                 WHERE t.type_id = v_type), false) THEN
                outcome := 'replica_unavailable';
                RETURN NEXT;
                RETURN;
            END IF;
            -- Then the locks: counters (waiting, holding no row) and the
            -- replica without waiting; if another transaction holds the
            -- replica, everything again in order, replica first.
            FOR v_round IN 1..2 LOOP
                BEGIN
                    IF v_round = 1 THEN
                        v_stage := 'counters';
                        v_room := connreg.lock_scopes_with_room(v_scopes);
                        v_stage := 'replica';
                        SELECT r.state IN ('ready', 'draining') AND r.lease_expires_at_ms > p_now_ms
                                   AND r.version_id = v_version AND NOT r.circuit_open,
                               v_room AND r.active < r.capacity
                          INTO v_usable, v_room
                          FROM connreg.replicas r
                         WHERE r.replica_id = v_replica
                           FOR UPDATE NOWAIT;
                    ELSE
                        v_stage := 'replica';
                        SELECT r.state IN ('ready', 'draining') AND r.lease_expires_at_ms > p_now_ms
                                   AND r.version_id = v_version AND NOT r.circuit_open,
                               r.active < r.capacity
                          INTO v_usable, v_room
                          FROM connreg.replicas r
                         WHERE r.replica_id = v_replica
                           FOR UPDATE;
                        v_stage := 'counters';
                        IF v_usable AND v_room THEN
                            v_room := connreg.lock_scopes_with_room(v_scopes);
                        END IF;
                    END IF;
                    IF NOT v_usable THEN
                        RAISE EXCEPTION USING ERRCODE = 'CR002';
                    END IF;
                    IF NOT v_room THEN
                        RAISE EXCEPTION USING ERRCODE = 'CR001';
                    END IF;
                EXCEPTION
                    WHEN SQLSTATE 'CR002' THEN
                        outcome := 'replica_unavailable';
                        RETURN NEXT;
                        RETURN;
                    WHEN SQLSTATE 'CR001' THEN
                        outcome := 'no_capacity';
                        RETURN NEXT;
                        RETURN;
                    WHEN lock_not_available THEN
                        -- The replica was held (round 1, NOWAIT): go round
                        -- again in order. A wait past the bound: contention
                        -- past the limit.
                        IF v_round = 1 AND v_stage = 'replica' THEN
                            CONTINUE;
                        END IF;
                        outcome := 'no_capacity';
                        RETURN NEXT;
                        RETURN;
                END;
                EXIT;
            END LOOP;
            PERFORM connreg.reserve_scopes(v_scopes);
            UPDATE connreg.replicas r SET active = r.active + 1 WHERE r.replica_id = v_replica;
            UPDATE connreg.assignments a
               SET fence = nextval('connreg.fence_tokens'), attempt = a.attempt + 1, reserved = true
             WHERE a.action_id = p_action;
            outcome := 'reserved';
        END IF;
    ELSE
        -- With a single attempt, that attempt is the last one: it waits.
        v_waiting := p_attempts_max <= 1;
        LOOP
            -- Bounded: each round excludes a binding, marks one busy for
            -- this attempt, or ends an attempt.
            v_rounds := v_rounds + 1;
            IF v_rounds > p_attempts_max * (p_excluded_max + 2) THEN
                outcome := 'no_capacity';
                RETURN NEXT;
                RETURN;
            END IF;
            -- The best eligible pair in route order (ROUTE-9, ROUTE-10),
            -- read without locks.
            SELECT e.binding_id, e.priority, e.policy_revision, e.credential_ref,
                   e.credential_revision, e.quota_policy_ref, e.quota_policy_revision,
                   e.instance_id, e.secret_provider_ref, e.secret_provider_revision,
                   e.version_id, e.type_id, r.replica_id
              INTO cand
              FROM connreg.eligible_bindings e
              JOIN connreg.replicas r
                ON r.instance_id = e.instance_id AND r.version_id = e.version_id
             WHERE e.tenant_id = p_tenant AND e.capability_id = p_capability
               AND e.scopes_have_room AND NOT (e.binding_id = ANY (v_excluded))
               AND NOT (e.binding_id = ANY (v_busy))
               AND r.state = 'ready' AND r.lease_expires_at_ms > p_now_ms
               AND r.active < r.capacity AND NOT r.circuit_open
               AND r.capacity_class = p_capacity_class
               AND (p_cross_region_allowed OR r.region = p_region)
             ORDER BY e.priority, r.region IS DISTINCT FROM p_region,
                      r.zone IS DISTINCT FROM p_zone, r.active,
                      substr(md5(p_action || '/' || r.replica_id), 1, 16),
                      e.instance_id, r.replica_id, e.binding_id
             LIMIT 1;
            IF NOT FOUND THEN
                IF cardinality(v_busy) = 0 THEN
                    -- ROUTE-5: at least one enabled binding whose chain is
                    -- eligible; otherwise nothing eligible has room.
                    IF EXISTS (SELECT 1 FROM connreg.eligible_bindings e
                                WHERE e.tenant_id = p_tenant
                                  AND e.capability_id = p_capability) THEN
                        outcome := 'no_capacity';
                    ELSE
                        outcome := 'no_eligible_binding';
                    END IF;
                    RETURN NEXT;
                    RETURN;
                END IF;
                -- Eligible replicas exist and other decisions hold them
                -- (ROUTE-6): pause, then try again; the last attempt waits.
                v_attempt := v_attempt + 1;
                IF v_attempt > p_attempts_max THEN
                    outcome := 'no_capacity';
                    RETURN NEXT;
                    RETURN;
                END IF;
                v_waiting := v_attempt >= p_attempts_max;
                IF NOT v_waiting THEN
                    PERFORM pg_sleep(p_backoff_ms_per_attempt * v_attempt / 1000.0);
                END IF;
                v_busy := '{}';
                CONTINUE;
            END IF;

            v_scopes := ARRAY(SELECT bs.scope_id FROM connreg.binding_scopes bs
                               WHERE bs.binding_id = cand.binding_id ORDER BY bs.scope_id);
            BEGIN
                IF NOT v_waiting THEN
                    -- The binding's counters first, waiting while holding
                    -- no row; then the best replica of its instance that no
                    -- other decision holds, without waiting, re-checked on
                    -- its newest version.
                    v_room := connreg.lock_scopes_with_room(v_scopes);
                    IF NOT v_room THEN
                        RAISE EXCEPTION USING ERRCODE = 'CR001';
                    END IF;
                    SELECT r.replica_id, r.endpoint, r.peer_identity, r.region, r.zone
                      INTO pick
                      FROM connreg.replicas r
                     WHERE r.replica_id = cand.replica_id
                       AND r.state = 'ready' AND r.lease_expires_at_ms > p_now_ms
                       AND r.active < r.capacity AND NOT r.circuit_open
                       FOR UPDATE OF r SKIP LOCKED;
                    IF NOT FOUND THEN
                        -- Held by another decision (or changed): the next
                        -- best of the same instance that nobody holds.
                        SELECT r.replica_id, r.endpoint, r.peer_identity, r.region, r.zone
                          INTO pick
                          FROM connreg.replicas r
                         WHERE r.instance_id = cand.instance_id
                           AND r.version_id = cand.version_id
                           AND r.state = 'ready' AND r.lease_expires_at_ms > p_now_ms
                           AND r.active < r.capacity AND NOT r.circuit_open
                           AND r.capacity_class = p_capacity_class
                           AND (p_cross_region_allowed OR r.region = p_region)
                         ORDER BY r.region IS DISTINCT FROM p_region,
                                  r.zone IS DISTINCT FROM p_zone, r.active,
                                  substr(md5(p_action || '/' || r.replica_id), 1, 16),
                                  r.replica_id
                         LIMIT 1
                           FOR UPDATE OF r SKIP LOCKED;
                        IF NOT FOUND THEN
                            RAISE EXCEPTION USING ERRCODE = 'CR003';
                        END IF;
                    END IF;
                ELSE
                    -- The last attempt: the best replica, waited for, then
                    -- its counters, in order.
                    SELECT r.replica_id, r.endpoint, r.peer_identity, r.region, r.zone
                      INTO pick
                      FROM connreg.replicas r
                     WHERE r.replica_id = cand.replica_id
                       AND r.state = 'ready' AND r.lease_expires_at_ms > p_now_ms
                       AND r.active < r.capacity AND NOT r.circuit_open
                       FOR UPDATE OF r;
                    IF NOT FOUND THEN
                        RAISE EXCEPTION USING ERRCODE = 'CR003';
                    END IF;
                    v_room := connreg.lock_scopes_with_room(v_scopes);
                    IF NOT v_room THEN
                        RAISE EXCEPTION USING ERRCODE = 'CR001';
                    END IF;
                END IF;
            EXCEPTION
                WHEN SQLSTATE 'CR001' THEN
                    -- The room the filter saw was taken meanwhile: this
                    -- binding is out, as if its scopes had been full; the
                    -- rollback released its counters and any replica.
                    IF cardinality(v_excluded) >= p_excluded_max THEN
                        outcome := 'no_capacity';
                        RETURN NEXT;
                        RETURN;
                    END IF;
                    v_excluded := v_excluded || cand.binding_id;
                    CONTINUE;
                WHEN SQLSTATE 'CR003' THEN
                    -- Every replica of this binding is held (or, waiting,
                    -- the one waited for changed): the others, this attempt.
                    IF v_waiting THEN
                        outcome := 'no_capacity';
                        RETURN NEXT;
                        RETURN;
                    END IF;
                    v_busy := v_busy || cand.binding_id;
                    CONTINUE;
                WHEN lock_not_available THEN
                    -- A wait past `p_wait_ms`: contention past the limit.
                    outcome := 'no_capacity';
                    RETURN NEXT;
                    RETURN;
            END;
            EXIT;
        END LOOP;

        -- ROUTE-7: every scope, the replica count, a fresh fence and the
        -- complete route, in this one transaction.
        PERFORM connreg.reserve_scopes(v_scopes);
        UPDATE connreg.replicas r SET active = r.active + 1 WHERE r.replica_id = pick.replica_id;
        INSERT INTO connreg.assignments AS a (
            action_id, tenant_id, capability_id,
            binding_id, instance_id, version_id, type_id, replica_id, endpoint,
            peer_identity, region, zone,
            catalog_revision, binding_priority, policy_revision, credential_ref,
            credential_revision, secret_provider_ref, secret_provider_revision,
            quota_policy_ref, quota_policy_revision, capacity_class,
            fence, attempt, reserved)
        VALUES (
            p_action, p_tenant, p_capability,
            cand.binding_id, cand.instance_id, cand.version_id, cand.type_id, pick.replica_id,
            pick.endpoint, pick.peer_identity, pick.region, pick.zone,
            v_revision, cand.priority, cand.policy_revision, cand.credential_ref,
            cand.credential_revision, cand.secret_provider_ref, cand.secret_provider_revision,
            cand.quota_policy_ref, cand.quota_policy_revision, p_capacity_class,
            nextval('connreg.fence_tokens'), 1, true);
        INSERT INTO connreg.assignment_scopes (action_id, scope_id)
        SELECT p_action, s FROM unnest(v_scopes) AS s;
        outcome := 'created';
    END IF;

    -- The route as stored.
    SELECT a.action_id, a.tenant_id, a.capability_id, a.binding_id, a.instance_id,
           a.version_id, a.type_id, a.replica_id, a.endpoint, a.peer_identity, a.region,
           a.zone, a.catalog_revision, a.binding_priority, a.policy_revision,
           a.credential_ref, a.credential_revision, a.secret_provider_ref,
           a.secret_provider_revision, a.quota_policy_ref, a.quota_policy_revision,
           a.capacity_class, a.fence, a.attempt, a.reserved, a.last_settlement,
           ARRAY(SELECT s.scope_id FROM connreg.assignment_scopes s
                  WHERE s.action_id = a.action_id ORDER BY s.scope_id)
      INTO action_id, tenant_id, capability_id, binding_id, instance_id,
           version_id, type_id, replica_id, endpoint, peer_identity, region,
           zone, catalog_revision, binding_priority, policy_revision,
           credential_ref, credential_revision, secret_provider_ref,
           secret_provider_revision, quota_policy_ref, quota_policy_revision,
           capacity_class, fence, attempt, reserved, last_settlement, scopes
      FROM connreg.assignments a
     WHERE a.action_id = p_action;
    IF p_commit_order THEN
        commit_seq := nextval('connreg.commit_order');
    END IF;
    RETURN NEXT;
END
$$;
REVOKE ALL ON FUNCTION connreg.route_decide(text, text, text, bigint, text, boolean, text,
    text, integer, integer, integer, boolean) FROM PUBLIC;

-- The whole resolve: the action's advisory lock and the catalog's shared
-- lock (ROUTE-3, ROUTE-5), in that order; then every lock wait of the
-- decision bounded by `p_wait_ms`, and the caller's `lock_timeout` put
-- back afterwards.
CREATE FUNCTION connreg.route_resolve(
    p_action text,
    p_tenant text,
    p_capability text,
    p_now_ms bigint,
    p_capacity_class text,
    p_cross_region_allowed boolean,
    p_region text,
    p_zone text,
    p_action_lock_class integer,
    p_action_lock_key integer,
    p_catalog_lock_class integer,
    p_catalog_lock_key integer,
    p_attempts_max integer,
    p_backoff_ms_per_attempt integer,
    p_wait_ms integer,
    p_excluded_max integer,
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
LANGUAGE plpgsql
AS $$
DECLARE
    v_lock_timeout text;
BEGIN
    PERFORM pg_advisory_xact_lock(p_action_lock_class, p_action_lock_key),
            pg_advisory_xact_lock_shared(p_catalog_lock_class, p_catalog_lock_key);
    v_lock_timeout := current_setting('lock_timeout');
    PERFORM set_config('lock_timeout', p_wait_ms::text, true);
    RETURN QUERY SELECT * FROM connreg.route_decide(
        p_action, p_tenant, p_capability, p_now_ms, p_capacity_class,
        p_cross_region_allowed, p_region, p_zone, p_attempts_max,
        p_backoff_ms_per_attempt, p_excluded_max, p_commit_order);
    PERFORM set_config('lock_timeout', v_lock_timeout, true);
END
$$;
REVOKE ALL ON FUNCTION connreg.route_resolve(text, text, text, bigint, text, boolean, text,
    text, integer, integer, integer, integer, integer, integer, integer, integer, boolean)
    FROM PUBLIC;

-- The catalog's exclusive lock for a publication, waiting in the queue at
-- most `p_wait_ms` (LOCK-4): PostgreSQL parks new shared requests behind a
-- waiting exclusive one, so a publisher must not wait long. The wait runs
-- in a subtransaction, so a timeout leaves the caller's transaction usable
-- (it answers false), and the caller's `lock_timeout` is put back.
CREATE FUNCTION connreg.catalog_lock_exclusive_within(
    p_class integer, p_key integer, p_wait_ms integer) RETURNS boolean
LANGUAGE plpgsql
AS $$
DECLARE
    v_lock_timeout text := current_setting('lock_timeout');
BEGIN
    PERFORM set_config('lock_timeout', p_wait_ms::text, true);
    BEGIN
        PERFORM pg_advisory_xact_lock(p_class, p_key);
    EXCEPTION WHEN lock_not_available THEN
        PERFORM set_config('lock_timeout', v_lock_timeout, true);
        RETURN false;
    END;
    PERFORM set_config('lock_timeout', v_lock_timeout, true);
    RETURN true;
END
$$;
REVOKE ALL ON FUNCTION connreg.catalog_lock_exclusive_within(integer, integer, integer)
    FROM PUBLIC;

-- The data role's privileges, now with the new functions and the commit
-- order sequence.
CREATE OR REPLACE FUNCTION connreg.grant_data_role(data_role text) RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog
AS $$
BEGIN
    EXECUTE format('REVOKE ALL ON ALL TABLES IN SCHEMA connreg FROM %I', data_role);
    EXECUTE format('REVOKE ALL ON ALL SEQUENCES IN SCHEMA connreg FROM %I', data_role);
    EXECUTE format('REVOKE ALL ON ALL FUNCTIONS IN SCHEMA connreg FROM %I', data_role);
    EXECUTE format('REVOKE ALL ON SCHEMA connreg FROM %I', data_role);

    EXECUTE format('GRANT USAGE ON SCHEMA connreg TO %I', data_role);
    EXECUTE format(
        'GRANT SELECT ON connreg.schema_version, connreg.catalog_state, '
        'connreg.connector_types, connreg.capability_definitions, '
        'connreg.connector_versions, connreg.version_capabilities, '
        'connreg.version_profiles, connreg.instances, connreg.admission_scopes, '
        'connreg.bindings, connreg.binding_scopes, connreg.eligible_bindings TO %I',
        data_role);
    EXECUTE format('GRANT SELECT, INSERT ON connreg.replicas TO %I', data_role);
    EXECUTE format(
        'GRANT UPDATE (health_seq, lease_expires_at_ms, active, state, circuit_open, '
        'consecutive_unknown) ON connreg.replicas TO %I', data_role);
    EXECUTE format('GRANT SELECT, INSERT ON connreg.assignments TO %I', data_role);
    EXECUTE format(
        'GRANT UPDATE (fence, attempt, reserved, last_settlement) '
        'ON connreg.assignments TO %I', data_role);
    EXECUTE format('GRANT SELECT, INSERT ON connreg.assignment_scopes TO %I', data_role);
    EXECUTE format('GRANT SELECT, UPDATE (in_use) ON connreg.admission_counters TO %I', data_role);
    EXECUTE format('GRANT SELECT, INSERT, DELETE ON connreg.operator_audit TO %I', data_role);
    EXECUTE format('GRANT USAGE ON SEQUENCE connreg.fence_tokens TO %I', data_role);
    EXECUTE format('GRANT USAGE ON SEQUENCE connreg.operator_audit_entry_id_seq TO %I', data_role);
    EXECUTE format('GRANT USAGE ON SEQUENCE connreg.commit_order TO %I', data_role);
    EXECUTE format(
        'GRANT EXECUTE ON FUNCTION connreg.route_resolve(text, text, text, bigint, text, '
        'boolean, text, text, integer, integer, integer, integer, integer, integer, integer, '
        'integer, boolean), connreg.route_decide(text, text, text, bigint, text, boolean, '
        'text, text, integer, integer, integer, boolean), '
        'connreg.lock_scopes_with_room(text[]), connreg.reserve_scopes(text[]) '
        'TO %I', data_role);
END
$$;
REVOKE ALL ON FUNCTION connreg.grant_data_role(text) FROM PUBLIC;

UPDATE connreg.schema_version SET version = 7;
