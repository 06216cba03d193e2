-- Fewer statements and less WAL for a new route (benches/README.md,
-- "PostgreSQL resolves, profiled"): `route_decide_round` as 0015 left it,
-- with its new-route path changed as follows; the existing and pinned
-- paths, the snapshot and the insert are unchanged.
--
-- * The binding's counters and the candidate replica are each counted by
--   one `UPDATE` that locks the row it writes. Before, each was first
--   locked without waiting (`FOR UPDATE NOWAIT`, `SKIP LOCKED`) and then
--   updated: a lock record (about 54 bytes of WAL) and a statement more
--   per row, and for the counters two function calls. An `UPDATE` cannot
--   skip or refuse a held row, so the two run with `lock_timeout` at 1 ms
--   (ROUTE_ROW_WAIT_MS; the round's other statements keep the caller's,
--   since a wait for a relation's extension lock is a lock wait too): a
--   decision waits at most 1 ms for any row (LOCK-1, LOCK-4), and past it
--   it does what a refused lock did: a held counter is waited for between
--   rounds (LOCK-3), a held replica is skipped and the next best in route
--   order chosen (ROUTE-6), and on the last attempt waited for between
--   rounds. A counter is counted only while it has room; fewer rows
--   counted than the binding has scopes excludes the binding, as before.
-- * A skipped replica (held, or changed since the unlocked read) is left
--   out of the next candidate query, at most 16 of them a round; with
--   every eligible replica skipped the attempt pauses, as it did when
--   every replica of a binding was held.
-- * The binding's scopes come with the candidate (one statement fewer),
--   and a created route is answered from the values it wrote instead of
--   being read back through `connreg.routes`.

CREATE OR REPLACE FUNCTION connreg.route_decide_round(p_action text, p_tenant text, p_capability text, p_now_ms bigint, p_capacity_class text, p_cross_region_allowed boolean, p_region text, p_zone text, p_attempt integer, p_attempts_max integer, p_excluded_max integer, p_commit_order boolean)
 RETURNS TABLE(outcome text, action_id text, tenant_id text, capability_id text, binding_id text, instance_id text, version_id text, type_id text, replica_id text, endpoint text, peer_identity text, region text, zone text, catalog_revision bigint, binding_priority bigint, policy_revision bigint, credential_ref text, credential_revision bigint, secret_provider_ref text, secret_provider_revision bigint, quota_policy_ref text, quota_policy_revision bigint, capacity_class text, fence bigint, attempt bigint, reserved boolean, last_settlement text, scopes text[], commit_seq bigint)
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog', 'connreg', 'pg_temp'
AS $function$
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
    v_skipped text[] := '{}';    -- replicas another transaction held
    v_counted bigint;
    v_found boolean;
    v_lock_timeout text := current_setting('lock_timeout');
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
            -- Bounded: each pass excludes a binding, skips a replica (at
            -- most 16), or ends the round.
            v_rounds := v_rounds + 1;
            IF v_rounds > p_excluded_max + 16 + 2 THEN
                outcome := 'no_capacity';
                RETURN NEXT;
                RETURN;
            END IF;
            -- The best eligible pair in route order (ROUTE-9, ROUTE-10),
            -- read without locks, with its binding's scopes.
            v_found := false;
            IF cardinality(v_skipped) < 16 THEN
            SELECT c.*, ARRAY(SELECT bs.scope_id FROM connreg.binding_scopes bs
                               WHERE bs.binding_id = c.binding_id
                               ORDER BY bs.scope_id) AS scopes
              INTO cand
              FROM (
            SELECT e.binding_id, e.priority, e.policy_revision, e.credential_ref,
                   e.credential_revision, e.quota_policy_ref, e.quota_policy_revision,
                   e.instance_id, e.secret_provider_ref, e.secret_provider_revision,
                   e.version_id, e.type_id, r.replica_id
              FROM connreg.eligible_bindings e
              JOIN connreg.replicas r
                ON r.instance_id = e.instance_id AND r.version_id = e.version_id
             WHERE e.tenant_id = p_tenant AND e.capability_id = p_capability
               AND e.scopes_have_room AND NOT (e.binding_id = ANY (v_excluded))
               AND NOT (r.replica_id = ANY (v_skipped))
               AND r.state = 'ready' AND r.lease_expires_at_ms > p_now_ms
               AND r.active < r.capacity AND NOT r.circuit_open
               AND r.capacity_class = p_capacity_class
               AND (p_cross_region_allowed OR r.region = p_region)
             ORDER BY e.priority, r.region IS DISTINCT FROM p_region,
                      r.zone IS DISTINCT FROM p_zone, r.active,
                      substr(md5(p_action || '/' || r.replica_id), 1, 16),
                      e.instance_id, r.replica_id, e.binding_id
             LIMIT 1) c;
            v_found := FOUND;
            END IF;
            IF NOT v_found THEN
                IF cardinality(v_skipped) = 0 THEN
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

            v_scopes := cand.scopes;
            BEGIN
                -- The binding's counters, then the candidate replica, each
                -- counted by one UPDATE that locks the row it writes: no
                -- lock record besides the count (LOCK-3). A row another
                -- transaction holds is waited for at most 1 ms
                -- (ROUTE_ROW_WAIT_MS), never longer under the catalog lock
                -- (LOCK-1, LOCK-4); a counter is counted only while it has
                -- room. The rollback of this block restores the timeout.
                PERFORM set_config('lock_timeout', '1', true);
                v_stage := 'counters';
                IF cardinality(v_scopes) > 0 THEN
                    UPDATE connreg.admission_counters c SET in_use = c.in_use + 1
                      FROM connreg.admission_scopes s
                     WHERE c.scope_id = ANY (v_scopes) AND s.scope_id = c.scope_id
                       AND c.in_use < s.scope_limit;
                    GET DIAGNOSTICS v_counted = ROW_COUNT;
                    IF v_counted < cardinality(v_scopes) THEN
                        RAISE EXCEPTION USING ERRCODE = 'CR001';
                    END IF;
                END IF;
                v_stage := 'replica';
                UPDATE connreg.replicas r SET active = r.active + 1
                 WHERE r.replica_id = cand.replica_id
                   AND r.state = 'ready' AND r.lease_expires_at_ms > p_now_ms
                   AND r.active < r.capacity AND NOT r.circuit_open
                RETURNING r.replica_id, r.endpoint, r.peer_identity, r.region, r.zone
                  INTO pick;
                IF NOT FOUND THEN
                    -- Changed since the unlocked read: choose again.
                    RAISE EXCEPTION USING ERRCODE = 'CR003';
                END IF;
                PERFORM set_config('lock_timeout', v_lock_timeout, true);
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
                    v_skipped := v_skipped || cand.replica_id;
                    CONTINUE;
                WHEN lock_not_available THEN
                    IF v_stage = 'counters' THEN
                        RAISE EXCEPTION USING ERRCODE = 'CR010',
                            MESSAGE = jsonb_build_object('wait', 'counters',
                                                         'scopes', to_jsonb(v_scopes))::text;
                    END IF;
                    IF NOT v_waiting THEN
                        -- Held by another decision (ROUTE-6): skipped, and
                        -- the next best in route order chosen.
                        v_skipped := v_skipped || cand.replica_id;
                        CONTINUE;
                    END IF;
                    -- The last attempt waits for it between rounds.
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
            v_snapshot, nextval('connreg.fence_tokens'), 1, true, p_action, v_scopes, p_now_ms)
        RETURNING a.fence INTO fence;
        outcome := 'created';
        -- The route as written.
        action_id := p_action; tenant_id := p_tenant; capability_id := p_capability;
        binding_id := cand.binding_id; instance_id := cand.instance_id;
        version_id := cand.version_id; type_id := cand.type_id;
        replica_id := pick.replica_id; endpoint := pick.endpoint;
        peer_identity := pick.peer_identity; region := pick.region; zone := pick.zone;
        catalog_revision := v_revision; binding_priority := cand.priority;
        policy_revision := cand.policy_revision; credential_ref := cand.credential_ref;
        credential_revision := cand.credential_revision;
        secret_provider_ref := cand.secret_provider_ref;
        secret_provider_revision := cand.secret_provider_revision;
        quota_policy_ref := cand.quota_policy_ref;
        quota_policy_revision := cand.quota_policy_revision;
        capacity_class := p_capacity_class; attempt := 1; reserved := true;
        last_settlement := NULL; scopes := v_scopes;
        IF p_commit_order THEN
            commit_seq := connreg.commit_take();
        END IF;
        RETURN NEXT;
        RETURN;
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
        commit_seq := connreg.commit_take();
    END IF;
    RETURN NEXT;
END
$function$;

UPDATE connreg.schema_version SET version = 18;
