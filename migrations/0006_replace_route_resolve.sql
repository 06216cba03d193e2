-- Route resolution, fixed again: the last attempt's blocking wait for its
-- best replica row can close a lock cycle with another decision. A decision
-- may still hold admission counter rows locked by an earlier attempt whose
-- scopes had no room; waiting on a replica row that the other decision
-- holds while it waits for those counters is a deadlock, which PostgreSQL
-- breaks after `deadlock_timeout` by failing one of them with 40P01, an
-- `Unavailable` the in-memory backend never gives. The guarded wait now
-- treats `deadlock_detected` like `lock_not_available`, and so does the
-- counter locking of the choosing loop (the other side of such a cycle):
-- contention past the bounded limit, answered `NoCapacity` (ROUTE-6). Everything else is as in
-- 0005, whose header (and 0004's) documents the function.

CREATE OR REPLACE FUNCTION connreg.route_resolve(
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
    p_excluded_max integer)
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
    scopes text[])
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
    v_binding_exists boolean;
    v_any boolean;
    v_excluded text[] := '{}';
    v_pick text := 'best';
    v_attempt integer := 1;
    v_lock_timeout text;
    cand record;
BEGIN
    -- ROUTE-3: one decision per action at a time; ROUTE-5: one revision.
    PERFORM pg_advisory_xact_lock(p_action_lock_class, p_action_lock_key),
            pg_advisory_xact_lock_shared(p_catalog_lock_class, p_catalog_lock_key);
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
            SELECT r.state IN ('ready', 'draining') AND r.lease_expires_at_ms > p_now_ms
                       AND r.version_id = v_version AND NOT r.circuit_open,
                   r.active < r.capacity
              INTO v_usable, v_room
              FROM connreg.replicas r
             WHERE r.replica_id = v_replica
               FOR UPDATE;
            IF NOT FOUND OR NOT v_usable
               OR NOT COALESCE((SELECT v.active AND v.qualified FROM connreg.connector_versions v
                                 WHERE v.version_id = v_version), false)
               OR NOT COALESCE((SELECT t.enabled FROM connreg.connector_types t
                                 WHERE t.type_id = v_type), false) THEN
                outcome := 'replica_unavailable';
                RETURN NEXT;
                RETURN;
            END IF;
            IF v_room THEN
                v_room := connreg.lock_scopes_with_room(v_scopes);
            END IF;
            IF NOT v_room THEN
                outcome := 'no_capacity';
                RETURN NEXT;
                RETURN;
            END IF;
            PERFORM connreg.reserve_scopes(v_scopes);
            UPDATE connreg.replicas r SET active = r.active + 1 WHERE r.replica_id = v_replica;
            UPDATE connreg.assignments a
               SET fence = nextval('connreg.fence_tokens'), attempt = a.attempt + 1, reserved = true
             WHERE a.action_id = p_action;
            outcome := 'reserved';
        END IF;
    ELSE
        LOOP
            IF v_pick = 'best' THEN
                WITH best AS MATERIALIZED (
                    SELECT e.binding_id, e.priority, e.policy_revision, e.credential_ref,
                           e.credential_revision, e.quota_policy_ref, e.quota_policy_revision,
                           e.instance_id, e.secret_provider_ref, e.secret_provider_revision,
                           e.version_id, e.type_id, r.replica_id, r.endpoint, r.peer_identity,
                           r.region, r.zone
                      FROM connreg.eligible_bindings e
                      JOIN connreg.replicas r
                        ON r.instance_id = e.instance_id AND r.version_id = e.version_id
                     WHERE e.tenant_id = p_tenant AND e.capability_id = p_capability
                       AND e.scopes_have_room AND NOT (e.binding_id = ANY (v_excluded))
                       AND r.state = 'ready' AND r.lease_expires_at_ms > p_now_ms
                       AND r.active < r.capacity AND NOT r.circuit_open
                       AND r.capacity_class = p_capacity_class
                       AND (p_cross_region_allowed OR r.region = p_region)
                     ORDER BY e.priority, r.region IS DISTINCT FROM p_region,
                              r.zone IS DISTINCT FROM p_zone, r.active,
                              substr(md5(p_action || '/' || r.replica_id), 1, 16),
                              e.instance_id, r.replica_id, e.binding_id
                     LIMIT 1)
                SELECT best.* INTO cand
                  FROM best
                  JOIN connreg.replicas r ON r.replica_id = best.replica_id
                 WHERE r.state = 'ready' AND r.lease_expires_at_ms > p_now_ms
                   AND r.active < r.capacity AND NOT r.circuit_open
                   FOR UPDATE OF r SKIP LOCKED;
            ELSIF v_pick = 'skip' THEN
                SELECT e.binding_id, e.priority, e.policy_revision, e.credential_ref,
                       e.credential_revision, e.quota_policy_ref, e.quota_policy_revision,
                       e.instance_id, e.secret_provider_ref, e.secret_provider_revision,
                       e.version_id, e.type_id, r.replica_id, r.endpoint, r.peer_identity,
                       r.region, r.zone
                  INTO cand
                  FROM connreg.eligible_bindings e
                  JOIN connreg.replicas r
                    ON r.instance_id = e.instance_id AND r.version_id = e.version_id
                 WHERE e.tenant_id = p_tenant AND e.capability_id = p_capability
                   AND e.scopes_have_room AND NOT (e.binding_id = ANY (v_excluded))
                   AND r.state = 'ready' AND r.lease_expires_at_ms > p_now_ms
                   AND r.active < r.capacity AND NOT r.circuit_open
                   AND r.capacity_class = p_capacity_class
                   AND (p_cross_region_allowed OR r.region = p_region)
                 ORDER BY e.priority, r.region IS DISTINCT FROM p_region,
                          r.zone IS DISTINCT FROM p_zone, r.active,
                          substr(md5(p_action || '/' || r.replica_id), 1, 16),
                          e.instance_id, r.replica_id, e.binding_id
                 LIMIT 1
                   FOR UPDATE OF r SKIP LOCKED;
            ELSE
                -- The bound applies to this one statement only: the
                -- caller's own lock_timeout is put back right after it,
                -- so the counter locks below (and whatever the caller's
                -- transaction does next) wait as they would otherwise.
                -- Assignments leave FOUND alone; PERFORM would not.
                v_lock_timeout := current_setting('lock_timeout');
                PERFORM set_config('lock_timeout', p_wait_ms::text, true);
                BEGIN
                    SELECT e.binding_id, e.priority, e.policy_revision, e.credential_ref,
                           e.credential_revision, e.quota_policy_ref, e.quota_policy_revision,
                           e.instance_id, e.secret_provider_ref, e.secret_provider_revision,
                           e.version_id, e.type_id, r.replica_id, r.endpoint, r.peer_identity,
                           r.region, r.zone
                      INTO cand
                      FROM connreg.eligible_bindings e
                      JOIN connreg.replicas r
                        ON r.instance_id = e.instance_id AND r.version_id = e.version_id
                     WHERE e.tenant_id = p_tenant AND e.capability_id = p_capability
                       AND e.scopes_have_room AND NOT (e.binding_id = ANY (v_excluded))
                       AND r.state = 'ready' AND r.lease_expires_at_ms > p_now_ms
                       AND r.active < r.capacity AND NOT r.circuit_open
                       AND r.capacity_class = p_capacity_class
                       AND (p_cross_region_allowed OR r.region = p_region)
                     ORDER BY e.priority, r.region IS DISTINCT FROM p_region,
                              r.zone IS DISTINCT FROM p_zone, r.active,
                              substr(md5(p_action || '/' || r.replica_id), 1, 16),
                              e.instance_id, r.replica_id, e.binding_id
                     LIMIT 1
                       FOR UPDATE OF r;
                EXCEPTION WHEN lock_not_available OR deadlock_detected THEN
                    -- The bounded wait ran out, or the wait closed a cycle
                    -- with another decision (this one may already hold
                    -- counters from an earlier attempt): either way it is
                    -- contention past the limit, and the subtransaction's
                    -- rollback has released what the wait took.
                    v_lock_timeout := set_config('lock_timeout', v_lock_timeout, true);
                    outcome := 'no_capacity';
                    RETURN NEXT;
                    RETURN;
                END;
                v_lock_timeout := set_config('lock_timeout', v_lock_timeout, true);
            END IF;

            IF FOUND THEN
                v_scopes := ARRAY(SELECT bs.scope_id FROM connreg.binding_scopes bs
                                   WHERE bs.binding_id = cand.binding_id ORDER BY bs.scope_id);
                BEGIN
                    v_room := connreg.lock_scopes_with_room(v_scopes);
                EXCEPTION WHEN deadlock_detected THEN
                    -- The other side of the cycle above: a decision whose
                    -- last attempt waits on this one's replica while
                    -- holding these counters. Contention past the limit.
                    outcome := 'no_capacity';
                    RETURN NEXT;
                    RETURN;
                END;
                EXIT WHEN v_room;
                -- The room the filter saw was taken meanwhile: skip this
                -- binding's candidates, as if its scopes had been full.
                IF cardinality(v_excluded) >= p_excluded_max THEN
                    outcome := 'no_capacity';
                    RETURN NEXT;
                    RETURN;
                END IF;
                v_excluded := v_excluded || cand.binding_id;
                IF v_pick = 'best' THEN
                    v_pick := 'skip';
                END IF;
                CONTINUE;
            END IF;

            IF v_pick = 'wait' THEN
                outcome := 'no_capacity';
                RETURN NEXT;
                RETURN;
            END IF;
            SELECT EXISTS (SELECT 1 FROM connreg.eligible_bindings e
                            WHERE e.tenant_id = p_tenant AND e.capability_id = p_capability),
                   EXISTS (SELECT 1
                             FROM connreg.eligible_bindings e
                             JOIN connreg.replicas r
                               ON r.instance_id = e.instance_id AND r.version_id = e.version_id
                            WHERE e.tenant_id = p_tenant AND e.capability_id = p_capability
                              AND e.scopes_have_room AND NOT (e.binding_id = ANY (v_excluded))
                              AND r.state = 'ready' AND r.lease_expires_at_ms > p_now_ms
                              AND r.active < r.capacity AND NOT r.circuit_open
                              AND r.capacity_class = p_capacity_class
                              AND (p_cross_region_allowed OR r.region = p_region))
              INTO v_binding_exists, v_any;
            -- ROUTE-5: at least one enabled binding whose chain is eligible.
            IF NOT v_binding_exists THEN
                outcome := 'no_eligible_binding';
                RETURN NEXT;
                RETURN;
            END IF;
            IF NOT v_any THEN
                outcome := 'no_capacity';
                RETURN NEXT;
                RETURN;
            END IF;
            -- Eligible rows exist and other decisions hold them (ROUTE-6).
            IF v_pick = 'best' THEN
                -- The best one is held: the best free one, at once.
                v_pick := 'skip';
                CONTINUE;
            END IF;
            v_attempt := v_attempt + 1;
            IF v_attempt >= p_attempts_max THEN
                v_pick := 'wait';
            ELSE
                PERFORM pg_sleep(p_backoff_ms_per_attempt * v_attempt / 1000.0);
            END IF;
        END LOOP;

        -- ROUTE-7: every scope, the replica count, a fresh fence and the
        -- complete route, in this one transaction.
        PERFORM connreg.reserve_scopes(v_scopes);
        UPDATE connreg.replicas r SET active = r.active + 1 WHERE r.replica_id = cand.replica_id;
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
            cand.binding_id, cand.instance_id, cand.version_id, cand.type_id, cand.replica_id,
            cand.endpoint, cand.peer_identity, cand.region, cand.zone,
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
    RETURN NEXT;
END
$$;

UPDATE connreg.schema_version SET version = 6;
