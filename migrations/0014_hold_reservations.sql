-- PIN-8: a reservation is held for a bounded time. Lease maintenance
-- releases, after the replicas whose lease ended, the reservations taken
-- longer ago than the registry's configured hold, whoever still holds
-- them, so a reservation nobody can settle (a resolve that committed after
-- its caller stopped waiting, a caller that is gone for good) does not
-- hold capacity forever.
--
-- * `assignments.reserved_at_ms`: when the current reservation was taken,
--   on the registry's injected clock (LEASE-4). Reservations taken before
--   this migration have none and are released, as before, only by
--   settlement or by their replica's lease.
-- * `assignments_hold_ix`: the held reservations oldest first, so a call
--   finds the ones past their hold by index, in the order it releases
--   them (reserved at, then fence).
-- * `route_decide_round` stamps each reservation it takes; nothing else of
--   it changes.
-- * `data_lease_maintain` takes the hold as a third parameter. A
--   reservation past its hold is released only when its action's lock,
--   its replica's row and its counters are free right now (NOWAIT): none
--   of those is waited for out of the global order (LOCK-1); a busy one
--   stays for the next call, which `more` asks for.

ALTER TABLE connreg.assignments ADD COLUMN reserved_at_ms bigint;
ALTER TABLE connreg.assignments ADD CONSTRAINT assignments_reserved_at_ck
    CHECK (reserved_at_ms >= 0);
CREATE INDEX assignments_hold_ix ON connreg.assignments (reserved_at_ms, fence)
    WHERE reserved;

CREATE OR REPLACE FUNCTION connreg.route_decide_round(
    p_action text,
    p_tenant text,
    p_capability text,
    p_now_ms bigint,
    p_capacity_class text,
    p_cross_region_allowed boolean,
    p_region text,
    p_zone text,
    p_attempt integer,
    p_attempts_max integer,
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
SET search_path = pg_catalog, connreg, pg_temp
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
    v_snapshot bigint;
    v_usable boolean;
    v_room boolean;
    v_stage text;
    v_excluded text[] := '{}';   -- bindings whose scopes had no room
    v_busy text[] := '{}';       -- bindings whose every replica was held
    v_waiting boolean := p_attempt >= p_attempts_max;
    v_rounds integer := 0;
    cand record;
    pick record;
BEGIN
    SELECT cs.revision INTO v_revision FROM connreg.catalog_state cs;

    SELECT a.tenant_id, a.capability_id, a.reserved, a.replica_id, a.version_id, a.type_id,
           a.scopes
      INTO v_tenant, v_capability, v_reserved, v_replica, v_version, v_type, v_scopes
      FROM connreg.routes a
     WHERE a.action_id = p_action;
    IF FOUND THEN
        -- ROUTE-4: other coordinates reveal nothing of the route.
        IF v_tenant <> p_tenant OR v_capability <> p_capability THEN
            outcome := 'conflict';
            RETURN NEXT;
            RETURN;
        END IF;
        IF v_reserved THEN
            -- LOCK-5: maintenance and settlement release a route only
            -- while they hold its replica's row (FOR UPDATE); KEY SHARE
            -- conflicts with that, so the route read again under it is
            -- what every committed release left, and a release not yet
            -- committed waits for this answer.
            BEGIN
                PERFORM 1 FROM connreg.replicas r
                  WHERE r.replica_id = v_replica FOR KEY SHARE NOWAIT;
            EXCEPTION WHEN lock_not_available THEN
                RAISE EXCEPTION USING ERRCODE = 'CR010',
                    MESSAGE = jsonb_build_object('wait', 'route_replica',
                                                 'replica', v_replica)::text;
            END;
            SELECT a.reserved INTO v_reserved
              FROM connreg.assignments a WHERE a.action_id = p_action;
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
            -- Then the counters and the replica, neither waited for
            -- (LOCK-3): a held one is waited for between rounds.
            BEGIN
                v_stage := 'counters';
                v_room := connreg.take_scopes_nowait(v_scopes);
                v_stage := 'replica';
                SELECT r.state IN ('ready', 'draining') AND r.lease_expires_at_ms > p_now_ms
                           AND r.version_id = v_version AND NOT r.circuit_open,
                       v_room AND r.active < r.capacity
                  INTO v_usable, v_room
                  FROM connreg.replicas r
                 WHERE r.replica_id = v_replica
                   FOR UPDATE NOWAIT;
                IF NOT v_usable THEN
                    RAISE EXCEPTION USING ERRCODE = 'CR002';
                END IF;
                IF NOT v_room THEN
                    RAISE EXCEPTION USING ERRCODE = 'CR001';
                END IF;
                UPDATE connreg.replicas r SET active = r.active + 1
                 WHERE r.replica_id = v_replica;
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
                    IF v_stage = 'counters' THEN
                        RAISE EXCEPTION USING ERRCODE = 'CR010',
                            MESSAGE = jsonb_build_object('wait', 'counters',
                                                         'scopes', to_jsonb(v_scopes))::text;
                    END IF;
                    RAISE EXCEPTION USING ERRCODE = 'CR010',
                        MESSAGE = jsonb_build_object('wait', 'replica',
                                                     'replica', v_replica)::text;
            END;
            UPDATE connreg.assignments a
               SET fence = nextval('connreg.fence_tokens'), attempt = a.attempt + 1, reserved = true,
                   reserved_at_ms = p_now_ms
             WHERE a.action_id = p_action;
            outcome := 'reserved';
        END IF;
    ELSE
        LOOP
            -- Bounded: each pass excludes a binding, marks one busy, or
            -- ends the round.
            v_rounds := v_rounds + 1;
            -- (TENANT_CAPABILITY_BINDINGS_MAX bindings can be marked busy).
            IF v_rounds > p_excluded_max + 16 + 2 THEN
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
                -- (ROUTE-6): pause between rounds, then the next attempt.
                IF p_attempt >= p_attempts_max THEN
                    outcome := 'no_capacity';
                    RETURN NEXT;
                    RETURN;
                END IF;
                RAISE EXCEPTION USING ERRCODE = 'CR010',
                    MESSAGE = jsonb_build_object('wait', 'pause',
                                                 'attempt', p_attempt + 1)::text;
            END IF;

            v_scopes := ARRAY(SELECT bs.scope_id FROM connreg.binding_scopes bs
                               WHERE bs.binding_id = cand.binding_id ORDER BY bs.scope_id);
            BEGIN
                -- The binding's counters, then the best replica of its
                -- instance that no other decision holds, re-checked on its
                -- newest version; none of it waited for (LOCK-3).
                v_stage := 'counters';
                v_room := connreg.take_scopes_nowait(v_scopes);
                IF NOT v_room THEN
                    RAISE EXCEPTION USING ERRCODE = 'CR001';
                END IF;
                v_stage := 'replica';
                IF NOT v_waiting THEN
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
                    -- The last attempt: the best replica, NOWAIT; a held
                    -- one is waited for between rounds.
                    SELECT r.replica_id, r.endpoint, r.peer_identity, r.region, r.zone
                      INTO pick
                      FROM connreg.replicas r
                     WHERE r.replica_id = cand.replica_id
                       AND r.state = 'ready' AND r.lease_expires_at_ms > p_now_ms
                       AND r.active < r.capacity AND NOT r.circuit_open
                       FOR UPDATE OF r NOWAIT;
                    IF NOT FOUND THEN
                        -- Changed since the unlocked read: choose again.
                        RAISE EXCEPTION USING ERRCODE = 'CR003';
                    END IF;
                END IF;
                UPDATE connreg.replicas r SET active = r.active + 1
                 WHERE r.replica_id = pick.replica_id;
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
                    -- Every replica of this binding is held: the others.
                    v_busy := v_busy || cand.binding_id;
                    CONTINUE;
                WHEN lock_not_available THEN
                    IF v_stage = 'counters' THEN
                        RAISE EXCEPTION USING ERRCODE = 'CR010',
                            MESSAGE = jsonb_build_object('wait', 'counters',
                                                         'scopes', to_jsonb(v_scopes))::text;
                    END IF;
                    RAISE EXCEPTION USING ERRCODE = 'CR010',
                        MESSAGE = jsonb_build_object('wait', 'replica',
                                                     'replica', cand.replica_id)::text;
            END;
            EXIT;
        END LOOP;

        -- The route's snapshot: the one of its key when it holds every
        -- value this route copies, else a new one. The replica's row,
        -- locked above, keeps any other decision from inserting this key
        -- meanwhile; a key taken by other values is a corrupt store.
        FOR v_round IN 1..2 LOOP
            SELECT s.snapshot_id INTO v_snapshot
              FROM connreg.route_snapshots s
             WHERE s.replica_id = pick.replica_id AND s.binding_id = cand.binding_id
               AND s.catalog_revision = v_revision AND s.capacity_class = p_capacity_class
               AND s.tenant_id = p_tenant AND s.capability_id = p_capability
               AND s.instance_id = cand.instance_id AND s.version_id = cand.version_id
               AND s.type_id = cand.type_id AND s.endpoint = pick.endpoint
               AND s.peer_identity = pick.peer_identity AND s.region = pick.region
               AND s.zone = pick.zone AND s.binding_priority = cand.priority
               AND s.policy_revision = cand.policy_revision
               AND s.credential_ref = cand.credential_ref
               AND s.credential_revision = cand.credential_revision
               AND s.secret_provider_ref = cand.secret_provider_ref
               AND s.secret_provider_revision = cand.secret_provider_revision
               AND s.quota_policy_ref IS NOT DISTINCT FROM cand.quota_policy_ref
               AND s.quota_policy_revision IS NOT DISTINCT FROM cand.quota_policy_revision;
            EXIT WHEN FOUND;
            IF v_round = 2 THEN
                RAISE EXCEPTION USING ERRCODE = 'XX000',
                    MESSAGE = 'corrupt store: route_snapshots';
            END IF;
            INSERT INTO connreg.route_snapshots AS s (
                tenant_id, capability_id,
                binding_id, instance_id, version_id, type_id, replica_id, endpoint,
                peer_identity, region, zone,
                catalog_revision, binding_priority, policy_revision, credential_ref,
                credential_revision, secret_provider_ref, secret_provider_revision,
                quota_policy_ref, quota_policy_revision, capacity_class)
            VALUES (
                p_tenant, p_capability,
                cand.binding_id, cand.instance_id, cand.version_id, cand.type_id,
                pick.replica_id, pick.endpoint, pick.peer_identity, pick.region, pick.zone,
                v_revision, cand.priority, cand.policy_revision, cand.credential_ref,
                cand.credential_revision, cand.secret_provider_ref,
                cand.secret_provider_revision, cand.quota_policy_ref,
                cand.quota_policy_revision, p_capacity_class)
            ON CONFLICT ON CONSTRAINT route_snapshots_uk DO NOTHING
            RETURNING s.snapshot_id INTO v_snapshot;
            EXIT WHEN FOUND;
        END LOOP;

        -- ROUTE-7: every scope and the replica count (both counted above,
        -- in the candidate's subtransaction), a fresh fence and the
        -- complete route, in this one transaction.
        INSERT INTO connreg.assignments AS a (
            snapshot_id, fence, attempt, reserved, action_id, scopes, reserved_at_ms)
        VALUES (
            v_snapshot, nextval('connreg.fence_tokens'), 1, true, p_action, v_scopes, p_now_ms);
        outcome := 'created';
    END IF;

    -- The route as stored.
    SELECT a.action_id, a.tenant_id, a.capability_id, a.binding_id, a.instance_id,
           a.version_id, a.type_id, a.replica_id, a.endpoint, a.peer_identity, a.region,
           a.zone, a.catalog_revision, a.binding_priority, a.policy_revision,
           a.credential_ref, a.credential_revision, a.secret_provider_ref,
           a.secret_provider_revision, a.quota_policy_ref, a.quota_policy_revision,
           a.capacity_class, a.fence, a.attempt, a.reserved, a.last_settlement,
           a.scopes
      INTO action_id, tenant_id, capability_id, binding_id, instance_id,
           version_id, type_id, replica_id, endpoint, peer_identity, region,
           zone, catalog_revision, binding_priority, policy_revision,
           credential_ref, credential_revision, secret_provider_ref,
           secret_provider_revision, quota_policy_ref, quota_policy_revision,
           capacity_class, fence, attempt, reserved, last_settlement, scopes
      FROM connreg.routes a
     WHERE a.action_id = p_action;
    -- After every lock this transaction takes (LOCK-5).
    IF p_commit_order THEN
        commit_seq := nextval('connreg.commit_order');
    END IF;
    RETURN NEXT;
END
$$;

DROP FUNCTION connreg.data_lease_maintain(bigint, integer);

-- LEASE-2 as in 0013, then PIN-8: the reservations past their hold, oldest
-- first, in the room the batch left (at most p_max, and the call's 10,000
-- reservations in all).
CREATE FUNCTION connreg.data_lease_maintain(p_now_ms bigint, p_max integer, p_hold_ms bigint)
RETURNS TABLE (expired text[], released bigint, more boolean, releases text)
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, connreg, pg_temp
SET lock_timeout = 2500
AS $$
DECLARE
    v_expired text[] := '{}';
    v_held bigint := 0;
    v_n bigint;
    v_actions text[];
    v_releases jsonb;
    v_room bigint;
    v_taken bigint := 0;
    v_more_holds boolean := false;
    v_replica text;
    v_scopes text[];
    v_reserved boolean;
    v_fence bigint;
    r record;
    h record;
BEGIN
    IF p_now_ms IS NULL OR p_now_ms < 0 THEN
        RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = 'now must be at least 0';
    END IF;
    IF p_max IS NULL OR p_max NOT BETWEEN 1 AND 1000 THEN
        RAISE EXCEPTION USING ERRCODE = '22023',
            MESSAGE = 'maintenance batch must be 1 to 1000';
    END IF;
    IF p_hold_ms IS NULL OR p_hold_ms NOT BETWEEN 100 AND 604800000 THEN
        RAISE EXCEPTION USING ERRCODE = '22023',
            MESSAGE = 'reservation hold must be 100 to 604800000 ms';
    END IF;
    FOR r IN
        SELECT x.replica_id FROM connreg.replicas x
         WHERE x.state <> 'offline' AND x.lease_expires_at_ms <= p_now_ms
         ORDER BY x.lease_expires_at_ms, x.replica_id
         LIMIT p_max
         FOR UPDATE SKIP LOCKED
    LOOP
        SELECT count(*) INTO v_n
          FROM connreg.route_snapshots s
          JOIN connreg.assignments a ON a.snapshot_id = s.snapshot_id
         WHERE s.replica_id = r.replica_id AND a.reserved;
        EXIT WHEN cardinality(v_expired) > 0 AND v_held + v_n > 10000;
        v_expired := v_expired || r.replica_id;
        v_held := v_held + v_n;
    END LOOP;

    SELECT coalesce(array_agg(a.action_id ORDER BY a.action_id), '{}'),
           coalesce(jsonb_agg(jsonb_build_object(
               'action', a.action_id, 'fence', a.fence, 'replica', s.replica_id,
               'scopes', to_jsonb(a.scopes), 'reason', 'lease_expired')
               ORDER BY a.action_id), '[]'::jsonb)
      INTO v_actions, v_releases
      FROM connreg.route_snapshots s
      JOIN connreg.assignments a ON a.snapshot_id = s.snapshot_id
     WHERE s.replica_id = ANY (v_expired) AND a.reserved;
    PERFORM 1 FROM connreg.admission_counters c
      WHERE c.scope_id IN (SELECT DISTINCT u.scope_id FROM connreg.assignments a,
                                  unnest(a.scopes) AS u(scope_id)
                            WHERE a.action_id = ANY (v_actions))
      ORDER BY c.scope_id FOR UPDATE;
    PERFORM 1 FROM connreg.assignments a
      WHERE a.action_id = ANY (v_actions) ORDER BY a.action_id FOR UPDATE;
    UPDATE connreg.admission_counters c SET in_use = greatest(c.in_use - d.n, 0)
      FROM (SELECT u.scope_id, count(*) AS n
              FROM connreg.assignments a, unnest(a.scopes) AS u(scope_id)
             WHERE a.action_id = ANY (v_actions) GROUP BY u.scope_id) d
     WHERE c.scope_id = d.scope_id;
    UPDATE connreg.replicas x
       SET state = 'offline', active = greatest(x.active - coalesce(d.n, 0), 0)
      FROM unnest(v_expired) AS e(replica_id)
      LEFT JOIN (SELECT s.replica_id, count(*) AS n
                   FROM connreg.route_snapshots s
                   JOIN connreg.assignments a ON a.snapshot_id = s.snapshot_id
                  WHERE s.replica_id = ANY (v_expired) AND a.reserved
                  GROUP BY s.replica_id) d ON d.replica_id = e.replica_id
     WHERE x.replica_id = e.replica_id;
    UPDATE connreg.assignments a SET reserved = false, last_settlement = 'lease_expired'
     WHERE a.action_id = ANY (v_actions);

    -- PIN-8. Each reservation past its hold is taken in the global order
    -- (its action's lock, its replica's row, its counters, its route) but
    -- without waiting: a busy one stays for the next call.
    v_room := least(p_max, 10000 - cardinality(v_actions));
    FOR h IN
        SELECT a.action_id, a.fence FROM connreg.assignments a
         WHERE a.reserved AND a.reserved_at_ms <= p_now_ms - p_hold_ms
         ORDER BY a.reserved_at_ms, a.fence
         LIMIT v_room + 1
    LOOP
        IF v_taken >= v_room THEN
            v_more_holds := true;
            EXIT;
        END IF;
        BEGIN
            PERFORM 1 FROM connreg.protocol_locks l
              WHERE l.lock_class = 1668182530
                AND l.slot = ('x' || left(md5(h.action_id), 8))::bit(32)::integer & 65535
              FOR NO KEY UPDATE NOWAIT;
            SELECT s.replica_id, a.scopes, a.reserved, a.fence
              INTO v_replica, v_scopes, v_reserved, v_fence
              FROM connreg.assignments a
              JOIN connreg.route_snapshots s ON s.snapshot_id = a.snapshot_id
             WHERE a.action_id = h.action_id;
            IF v_reserved AND v_fence = h.fence THEN
                PERFORM 1 FROM connreg.replicas x WHERE x.replica_id = v_replica
                  FOR UPDATE NOWAIT;
                PERFORM 1 FROM connreg.admission_counters c
                  WHERE c.scope_id = ANY (v_scopes) ORDER BY c.scope_id FOR UPDATE NOWAIT;
                PERFORM 1 FROM connreg.assignments a WHERE a.action_id = h.action_id
                  FOR UPDATE NOWAIT;
                UPDATE connreg.admission_counters c SET in_use = greatest(c.in_use - 1, 0)
                 WHERE c.scope_id = ANY (v_scopes);
                UPDATE connreg.replicas x SET active = greatest(x.active - 1, 0)
                 WHERE x.replica_id = v_replica;
                UPDATE connreg.assignments a
                   SET reserved = false, last_settlement = 'lease_expired'
                 WHERE a.action_id = h.action_id;
                v_releases := v_releases || jsonb_build_object(
                    'action', h.action_id, 'fence', h.fence, 'replica', v_replica,
                    'scopes', to_jsonb(v_scopes), 'reason', 'hold_expired');
                v_taken := v_taken + 1;
            END IF;
        EXCEPTION WHEN lock_not_available THEN
            v_more_holds := true;
        END;
    END LOOP;

    RETURN QUERY SELECT v_expired, cardinality(v_actions)::bigint + v_taken,
        v_more_holds OR EXISTS (SELECT 1 FROM connreg.replicas x
                 WHERE x.state <> 'offline' AND x.lease_expires_at_ms <= p_now_ms
                   AND x.replica_id <> ALL (v_expired)),
        v_releases::text;
END
$$;
REVOKE ALL ON FUNCTION connreg.data_lease_maintain(bigint, integer, bigint) FROM PUBLIC;

UPDATE connreg.schema_version SET version = 14;
