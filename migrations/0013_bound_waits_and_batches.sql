-- Progress at fleet scale: every wait of the protocol bounded by the
-- protocol itself, no wait while holding the catalog lock, and lease
-- maintenance bounded by the reservations it releases.
--
-- * Lease maintenance (LEASE-2) takes expired replicas in lease order, at
--   most `p_max`, and stops before the replica whose held reservations
--   would take the call past `LEASE_MAINTENANCE_RESERVATIONS_MAX` (10,000;
--   a replica holds at most `REPLICA_CAPACITY_MAX`, 10,000, so the first
--   always fits). Each replica's reservations are found through its
--   snapshots by index; the rest is one set-based pass over what was
--   found: counters locked (scope order) and counted down once per scope,
--   routes locked and released, replicas counted down and marked offline
--   from one grouped count. The work is linear in the batch, which is
--   bounded; the quadratic count of 0012 is gone.
-- * A resolve holds the catalog lock only while it decides, and the
--   decision never waits (LOCK-1, LOCK-3, LOCK-4): every counter and
--   replica it takes is taken NOWAIT or SKIP LOCKED. When one is busy, or
--   every eligible replica is held and the attempt must pause, the round
--   is rolled back whole (catalog lock, counters and replica rows with
--   it: a savepoint's locks end with it) and the resolve waits for that
--   one lock, or sleeps, holding nothing but its action's lock, then
--   decides again. A publication queued for the catalog lock therefore
--   waits only for decisions in progress, which wait for nothing.
-- * The action's and the instance's locks are row locks on
--   `connreg.protocol_locks`, which only the protocol owner can touch
--   (AUTH-6): a data-role session can no longer hold them through the
--   advisory lock functions every role may call.
-- * An `existing` answer takes its replica's row in KEY SHARE mode, which
--   lease maintenance and settlement (FOR UPDATE) conflict with, and reads
--   the route again under it, so the answer and a maintenance release are
--   ordered by a lock both take (LOCK-5).
-- * Every data-plane function fixes its own `lock_timeout` (SET clause),
--   so a session's settings cannot stretch or remove a wait; the resolve
--   bounds its whole decision by `ROUTE_DECISION_MS_MAX` on the server's
--   own clock.

-- The protocol's lock keys: one row per (class, slot), locked and never
-- written. A key is the identifier's `lock_key` modulo 65,536, so two
-- identifiers share a slot with chance 1/65,536 and then only serialize
-- with each other.
CREATE TABLE connreg.protocol_locks (
    lock_class integer NOT NULL,
    slot integer NOT NULL,
    CONSTRAINT protocol_locks_pk PRIMARY KEY (lock_class, slot),
    CONSTRAINT protocol_locks_slot_ck CHECK (slot BETWEEN 0 AND 65535)
);
INSERT INTO connreg.protocol_locks (lock_class, slot)
SELECT c, s FROM unnest(ARRAY[1668182530, 1668182531]) AS c,
                 generate_series(0, 65535) AS s;

-- Takes the protocol lock of `p_id` in `p_class`, waiting at most the
-- caller's `lock_timeout` (each data-plane function fixes its own).
CREATE FUNCTION connreg.protocol_lock(p_class integer, p_id text) RETURNS void
LANGUAGE sql
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT 1 FROM connreg.protocol_locks l
     WHERE l.lock_class = p_class
       AND l.slot = ('x' || left(md5(p_id), 8))::bit(32)::integer & 65535
       FOR NO KEY UPDATE
$$;
REVOKE ALL ON FUNCTION connreg.protocol_lock(integer, text) FROM PUBLIC;

-- Counts one reservation in each of `p_scopes` when every scope exists
-- and has room, without waiting for any counter: a counter another
-- transaction holds raises lock_not_available.
CREATE FUNCTION connreg.take_scopes_nowait(p_scopes text[]) RETURNS boolean
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF cardinality(p_scopes) = 0 THEN
        RETURN true;
    END IF;
    PERFORM 1 FROM connreg.admission_counters c
      WHERE c.scope_id = ANY (p_scopes) ORDER BY c.scope_id FOR UPDATE NOWAIT;
    RETURN connreg.take_scopes(p_scopes);
END
$$;
REVOKE ALL ON FUNCTION connreg.take_scopes_nowait(text[]) FROM PUBLIC;

-- One round of the decision, under the catalog lock, waiting for nothing.
-- Answers as 0012's decision did, or raises CR010 with a JSON message
-- naming what to wait for before the next round:
--   {"wait": "counters", "scopes": [...]}   counters another transaction holds
--   {"wait": "replica", "replica": "..."}   a replica another transaction holds
--   {"wait": "route_replica", "replica": "..."}  the held route's replica
--   {"wait": "pause", "attempt": n}        every eligible replica was held:
--                                          pause, then attempt n
-- `p_attempt` is the attempt this round continues (ROUTE-6); the last
-- attempt takes its best replica NOWAIT, and a held one is waited for
-- between rounds.
CREATE FUNCTION connreg.route_decide_round(
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
               SET fence = nextval('connreg.fence_tokens'), attempt = a.attempt + 1, reserved = true
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
            snapshot_id, fence, attempt, reserved, action_id, scopes)
        VALUES (
            v_snapshot, nextval('connreg.fence_tokens'), 1, true, p_action, v_scopes);
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
REVOKE ALL ON FUNCTION connreg.route_decide_round(text, text, text, bigint, text, boolean,
    text, text, integer, integer, integer, boolean) FROM PUBLIC;

-- ROUTE-2..ROUTE-7: the decision in rounds. The action's lock first;
-- then each round waits for what the previous one found busy (or pauses
-- between attempts), holding nothing else, takes the catalog lock and
-- decides without waiting. A round that cannot finish is rolled back
-- whole. Each wait is bounded by ROUTE_LOCK_WAIT_MS (1,000 ms) and the
-- rounds together by ROUTE_DECISION_MS_MAX (2,000 ms) on the server's
-- clock; past either the answer is no_capacity (ROUTE-6). The action's
-- lock is waited for at most PROTOCOL_LOCK_WAIT_MS (2,500 ms): its holder
-- is a decision or a settlement, each bounded as above.
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
    -- ran just before a concurrent release would answer. Harnesses that
    -- observe commit order take the locked path, which orders the answer
    -- with every release (LOCK-5).
    IF NOT coalesce(p_commit_order, false) THEN
        RETURN QUERY
        SELECT 'existing'::text, a.action_id, a.tenant_id, a.capability_id, a.binding_id,
               a.instance_id, a.version_id, a.type_id, a.replica_id, a.endpoint,
               a.peer_identity, a.region, a.zone, a.catalog_revision, a.binding_priority,
               a.policy_revision, a.credential_ref, a.credential_revision,
               a.secret_provider_ref, a.secret_provider_revision, a.quota_policy_ref,
               a.quota_policy_revision, a.capacity_class, a.fence, a.attempt, a.reserved,
               a.last_settlement, a.scopes, NULL::bigint
          FROM connreg.routes a
         WHERE a.action_id = p_action AND a.reserved
           AND a.tenant_id = p_tenant AND a.capability_id = p_capability;
        IF FOUND THEN
            RETURN;
        END IF;
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
            RETURN QUERY SELECT * FROM connreg.route_decide_round(
                p_action, p_tenant, p_capability, p_now_ms, p_capacity_class,
                coalesce(p_cross_region_allowed, false), p_region, p_zone,
                v_attempt, 8, 16, coalesce(p_commit_order, false));
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

-- SETTLE-1..SETTLE-5, as in 0012, under the action's protocol lock.
CREATE OR REPLACE FUNCTION connreg.data_route_settle(
    p_given jsonb,
    p_outcome text,
    p_circuit_enabled boolean,
    p_circuit_threshold bigint)
RETURNS text
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, connreg, pg_temp
SET lock_timeout = 2500
AS $$
DECLARE
    v_action text := p_given->>'action_id';
    v_replica text := p_given->>'replica_id';
    v_open boolean;
    v_unknown bigint;
    v_replica_found boolean;
    v_route connreg.routes;
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
    PERFORM connreg.protocol_lock(1668182530, v_action);
    SELECT r.circuit_open, r.consecutive_unknown INTO v_open, v_unknown
      FROM connreg.replicas r WHERE r.replica_id = v_replica FOR UPDATE;
    v_replica_found := FOUND;
    SELECT * INTO v_route FROM connreg.routes a WHERE a.action_id = v_action;
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
    IF cardinality(v_scopes) > 1 THEN
        PERFORM 1 FROM connreg.admission_counters c
          WHERE c.scope_id = ANY(v_scopes) ORDER BY c.scope_id FOR UPDATE;
    END IF;
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

-- LEASE-2: expired replicas in lease order, at most p_max of them and at
-- most LEASE_MAINTENANCE_RESERVATIONS_MAX (10,000) reservations, released
-- in one set-based pass. Locks in the global order: replica rows (SKIP
-- LOCKED), counters in scope order, then the routes' rows.
CREATE OR REPLACE FUNCTION connreg.data_lease_maintain(p_now_ms bigint, p_max integer)
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
    v_releases text;
    r record;
BEGIN
    IF p_now_ms IS NULL OR p_now_ms < 0 THEN
        RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = 'now must be at least 0';
    END IF;
    IF p_max IS NULL OR p_max NOT BETWEEN 1 AND 1000 THEN
        RAISE EXCEPTION USING ERRCODE = '22023',
            MESSAGE = 'maintenance batch must be 1 to 1000';
    END IF;
    -- The batch: each replica's held reservations counted by index; the
    -- replica that would take the batch past the bound stays for the next
    -- call (the first always fits: a replica holds at most 10,000).
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

    -- What is released, named, before it changes.
    SELECT coalesce(array_agg(a.action_id ORDER BY a.action_id), '{}'),
           coalesce(jsonb_agg(jsonb_build_object(
               'action', a.action_id, 'fence', a.fence, 'replica', s.replica_id,
               'scopes', to_jsonb(a.scopes))
               ORDER BY a.action_id), '[]'::jsonb)::text
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
    RETURN QUERY SELECT v_expired, cardinality(v_actions)::bigint,
        EXISTS (SELECT 1 FROM connreg.replicas x
                 WHERE x.state <> 'offline' AND x.lease_expires_at_ms <= p_now_ms
                   AND x.replica_id <> ALL (v_expired)),
        v_releases;
END
$$;

-- LEASE-1, as in 0009, under the instance's protocol lock (the replicas-per-
-- instance limit counts siblings under it).
CREATE OR REPLACE FUNCTION connreg.data_replica_register(
    p_replica text, p_instance text, p_version text, p_endpoint text,
    p_peer_identity text, p_region text, p_zone text, p_capacity_class text,
    p_capacity bigint, p_health_seq bigint, p_lease_expires_at_ms bigint)
RETURNS TABLE (outcome text, replica jsonb)
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, connreg, pg_temp
SET lock_timeout = 2500
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
    PERFORM connreg.protocol_lock(1668182531, p_instance);
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

-- The limits the data-plane functions fix, for start-up's check: those of
-- 0008 and the bounds above.
DROP FUNCTION connreg.data_protocol_limits();
CREATE FUNCTION connreg.data_protocol_limits(
    OUT action_lock_class integer, OUT instance_lock_class integer,
    OUT route_lock_wait_ms integer, OUT route_lock_attempts_max integer,
    OUT route_lock_backoff_ms_per_attempt integer,
    OUT tenant_capability_bindings_max integer, OUT instance_replicas_max integer,
    OUT lease_maintenance_batch_max integer, OUT id_bytes_max integer,
    OUT text_bytes_max integer, OUT lease_maintenance_reservations_max integer,
    OUT route_decision_ms_max integer, OUT protocol_lock_wait_ms integer)
LANGUAGE sql IMMUTABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$ SELECT 1668182530, 1668182531, 1000, 8, 1, 16, 1024, 1000, 128, 512, 10000, 2000, 2500 $$;

-- Every other data-plane function fixes its lock waits too (AUTH-6,
-- LOCK-6): a session's lock_timeout of 0 cannot make a call wait forever.
DO $$
DECLARE
    f regprocedure;
BEGIN
    FOR f IN
        SELECT p.oid::regprocedure FROM pg_proc p
         WHERE p.pronamespace = 'connreg'::regnamespace AND p.proname LIKE 'data\_%'
    LOOP
        EXECUTE format('ALTER FUNCTION %s SET lock_timeout = 2500', f);
    END LOOP;
END
$$;

-- As in 0012, with the protocol's lock rows (locking a row takes UPDATE)
-- and the new helpers.
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
    EXECUTE format('GRANT INSERT ON connreg.route_snapshots TO %I', owner);
    EXECUTE format('GRANT USAGE ON SEQUENCE connreg.fence_tokens, connreg.commit_order, '
                   'connreg.route_snapshots_snapshot_id_seq TO %I', owner);
    FOR f IN
        SELECT p.oid::regprocedure FROM pg_proc p
         WHERE p.pronamespace = 'connreg'::regnamespace
           AND p.proname IN ('route_decide_round', 'lock_scopes_with_room', 'take_scopes',
                             'take_scopes_nowait', 'protocol_lock', 'assignment_json',
                             'replica_json')
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

-- Functions nothing calls any more: the decision and resolve of 0007..0012
-- (replaced by `route_decide_round` and `data_route_resolve` above), the
-- advisory publication lock of 0007 (a table lock since 0008), and the
-- advisory lock key (the protocol's locks are rows now).
DROP FUNCTION connreg.route_resolve(text, text, text, bigint, text, boolean, text, text,
    integer, integer, integer, integer, integer, integer, integer, integer, boolean);
DROP FUNCTION connreg.route_decide(text, text, text, bigint, text, boolean, text, text,
    integer, integer, integer, boolean);
DROP FUNCTION connreg.catalog_lock_exclusive_within(integer, integer, integer);
DROP FUNCTION connreg.lock_key(text);

UPDATE connreg.schema_version SET version = 13;
