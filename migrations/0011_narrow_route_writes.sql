-- A narrower write path for a route (the performance targets in
-- benches/README.md): what a resolve and a settlement write, and how much
-- WAL that takes, without changing any answer.
--
-- * A route's admission scopes move into the route's own row, as
--   `assignments.scopes` (sorted), instead of one `assignment_scopes` row
--   and one primary-key entry per scope: a new route is one heap row and
--   its index entries. Existing routes are copied over, then the table is
--   dropped.
-- * `take_scopes` counts one reservation in each scope when every scope
--   exists and has room, and says whether it did. One scope, the common
--   case, is one `UPDATE` that waits for the counter, checks its room and
--   counts at once: one WAL record where a row lock and then an update
--   wrote two. Several scopes are still locked first, in scope order
--   (LOCK-1), then counted. The decision calls it where it locked the
--   counters before; the counts now happen inside the subtransaction that
--   abandons a candidate whole, so an abandoned candidate's counts are
--   rolled back with its locks. `reserve_scopes` has no caller left.
-- * A settlement of a one-scope route counts its scope down in one
--   `UPDATE` (the replica row, taken first, keeps the lock order).
-- * The replica's count moves inside the candidate's subtransaction too,
--   right after the row is locked: locked and updated by one transaction
--   ID, the row needs no MultiXact (a lock by the subtransaction and an
--   update by its parent made one on every resolve).
-- * Counters leave room on their pages for HOT updates (fillfactor), as
--   replica rows already do: every reservation and release rewrites one.
-- * Fences lose their unique index. Every fence is a fresh value of
--   `connreg.fence_tokens`, written only by the decision (the data role
--   reaches the table through the protocol functions alone, AUTH-6), so
--   the index only re-checked the sequence, at one more index entry per
--   resolve and per settlement (the settlement's update is not HOT). The
--   whole-database check of scale qualification still counts reused fences
--   (benches/src/qualify/dbcheck.rs).
-- * A resolve of a route that holds its reservation reads the route and
--   answers, before the action's and the catalog's locks: the common
--   retry and re-read costs one index lookup.
--
-- Answers, lock order, owners and grants are unchanged; the protocol owner
-- loses INSERT on the dropped table and may run `take_scopes`.

ALTER TABLE connreg.assignments ADD COLUMN scopes text[] COLLATE "C" NOT NULL DEFAULT '{}';
UPDATE connreg.assignments a
   SET scopes = s.scopes
  FROM (SELECT action_id, array_agg(scope_id ORDER BY scope_id) AS scopes
          FROM connreg.assignment_scopes GROUP BY action_id) s
 WHERE a.action_id = s.action_id;
ALTER TABLE connreg.assignments ALTER COLUMN scopes DROP DEFAULT;
DROP TABLE connreg.assignment_scopes;
DROP FUNCTION connreg.reserve_scopes(text[]);

ALTER TABLE connreg.admission_counters SET (fillfactor = 50);
ALTER TABLE connreg.assignments DROP CONSTRAINT assignments_fence_uk;

-- Takes one reservation in each of `p_scopes` if every scope exists and
-- has room, on the counters' newest versions; answers whether it did
-- (false: nothing counted). Waits for each counter within `lock_timeout`.
CREATE FUNCTION connreg.take_scopes(p_scopes text[]) RETURNS boolean
LANGUAGE plpgsql
AS $$
BEGIN
    IF cardinality(p_scopes) = 0 THEN
        RETURN true;
    ELSIF cardinality(p_scopes) = 1 THEN
        UPDATE connreg.admission_counters c SET in_use = c.in_use + 1
          FROM connreg.admission_scopes s
         WHERE c.scope_id = p_scopes[1] AND s.scope_id = c.scope_id
           AND c.in_use < s.scope_limit;
        RETURN FOUND;
    END IF;
    IF NOT connreg.lock_scopes_with_room(p_scopes) THEN
        RETURN false;
    END IF;
    UPDATE connreg.admission_counters c SET in_use = c.in_use + 1
     WHERE c.scope_id = ANY (p_scopes);
    RETURN true;
END
$$;
REVOKE ALL ON FUNCTION connreg.take_scopes(text[]) FROM PUBLIC;

-- The decision of 0007, with the route's scopes in its own row and the
-- counters counted by `take_scopes`.
CREATE OR REPLACE FUNCTION connreg.route_decide(
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
           a.scopes
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
                        v_room := connreg.take_scopes(v_scopes);
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
                            v_room := connreg.take_scopes(v_scopes);
                        END IF;
                    END IF;
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
                    v_room := connreg.take_scopes(v_scopes);
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
                    v_room := connreg.take_scopes(v_scopes);
                    IF NOT v_room THEN
                        RAISE EXCEPTION USING ERRCODE = 'CR001';
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

        -- ROUTE-7: every scope and the replica count (both counted above,
        -- in the candidate's subtransaction), a fresh fence and the
        -- complete route, in this one transaction.
        INSERT INTO connreg.assignments AS a (
            action_id, tenant_id, capability_id,
            binding_id, instance_id, version_id, type_id, replica_id, endpoint,
            peer_identity, region, zone,
            catalog_revision, binding_priority, policy_revision, credential_ref,
            credential_revision, secret_provider_ref, secret_provider_revision,
            quota_policy_ref, quota_policy_revision, capacity_class,
            fence, attempt, reserved, scopes)
        VALUES (
            p_action, p_tenant, p_capability,
            cand.binding_id, cand.instance_id, cand.version_id, cand.type_id, pick.replica_id,
            pick.endpoint, pick.peer_identity, pick.region, pick.zone,
            v_revision, cand.priority, cand.policy_revision, cand.credential_ref,
            cand.credential_revision, cand.secret_provider_ref, cand.secret_provider_revision,
            cand.quota_policy_ref, cand.quota_policy_revision, p_capacity_class,
            nextval('connreg.fence_tokens'), 1, true, v_scopes);
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
      FROM connreg.assignments a
     WHERE a.action_id = p_action;
    IF p_commit_order THEN
        commit_seq := nextval('connreg.commit_order');
    END IF;
    RETURN NEXT;
END
$$;

-- ROUTE-2..ROUTE-7 as in 0009, with a held route answered before any
-- lock is taken.
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
    -- A route that holds its reservation is answered as stored, without
    -- the action's and the catalog's locks (ROUTE-3): the answer is the
    -- committed row, as a resolve that ran just before a concurrent
    -- settlement would give. Harnesses that observe commit order take the
    -- locked path, which numbers the answer after every lock.
    IF NOT coalesce(p_commit_order, false) THEN
        RETURN QUERY
        SELECT 'existing'::text, a.action_id, a.tenant_id, a.capability_id, a.binding_id,
               a.instance_id, a.version_id, a.type_id, a.replica_id, a.endpoint,
               a.peer_identity, a.region, a.zone, a.catalog_revision, a.binding_priority,
               a.policy_revision, a.credential_ref, a.credential_revision,
               a.secret_provider_ref, a.secret_provider_revision, a.quota_policy_ref,
               a.quota_policy_revision, a.capacity_class, a.fence, a.attempt, a.reserved,
               a.last_settlement, a.scopes, NULL::bigint
          FROM connreg.assignments a
         WHERE a.action_id = p_action AND a.reserved
           AND a.tenant_id = p_tenant AND a.capability_id = p_capability;
        IF FOUND THEN
            RETURN;
        END IF;
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

-- The route columns a settlement compares (SETTLE-2), as before.
CREATE OR REPLACE FUNCTION connreg.assignment_json(a connreg.assignments) RETURNS jsonb
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
        'scopes', to_jsonb(a.scopes))
$$;

-- PIN-5, PIN-6: one action's route, only for its own tenant.
CREATE OR REPLACE FUNCTION connreg.data_route_get(p_tenant text, p_action text)
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
           a.scopes
    FROM connreg.assignments a
    WHERE a.action_id = p_action AND a.tenant_id = p_tenant
$$;

-- SETTLE-1..SETTLE-5, as in 0009; a one-scope route's counter is counted
-- down without a separate lock.
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

-- LEASE-2, as in 0010, with the scopes read from the routes' rows.
CREATE OR REPLACE FUNCTION connreg.data_lease_maintain(p_now_ms bigint, p_max integer)
RETURNS TABLE (expired text[], released bigint, more boolean, releases text)
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, connreg, pg_temp
AS $$
DECLARE
    v_expired text[];
    v_actions text[];
    v_releases text;
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
    -- What is released, named, before it changes.
    SELECT coalesce(jsonb_agg(jsonb_build_object(
               'action', a.action_id, 'fence', a.fence, 'replica', a.replica_id,
               'scopes', to_jsonb(a.scopes))
               ORDER BY a.action_id), '[]'::jsonb)::text
      INTO v_releases
      FROM connreg.assignments a WHERE a.action_id = ANY(v_actions);
    PERFORM 1 FROM connreg.admission_counters c
      WHERE c.scope_id IN (SELECT s.scope_id FROM connreg.assignments a,
                                  unnest(a.scopes) AS s(scope_id)
                            WHERE a.action_id = ANY(v_actions))
      ORDER BY c.scope_id FOR UPDATE;
    UPDATE connreg.admission_counters c SET in_use = greatest(c.in_use - d.n, 0)
      FROM (SELECT s.scope_id, count(*) AS n
              FROM connreg.assignments a, unnest(a.scopes) AS s(scope_id)
             WHERE a.action_id = ANY(v_actions) GROUP BY s.scope_id) d
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
                   AND r.replica_id <> ALL(v_expired)),
        v_releases;
END
$$;


-- As in 0008, without the dropped table and with `take_scopes`.
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
    EXECUTE format('GRANT UPDATE ON connreg.admission_counters, connreg.catalog_lock TO %I',
        owner);
    EXECUTE format('GRANT USAGE ON SEQUENCE connreg.fence_tokens, connreg.commit_order TO %I',
        owner);
    FOR f IN
        SELECT p.oid::regprocedure FROM pg_proc p
         WHERE p.pronamespace = 'connreg'::regnamespace
           AND p.proname IN ('route_decide', 'lock_scopes_with_room', 'take_scopes',
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

UPDATE connreg.schema_version SET version = 11;
