-- A route's fixed part in a shared row (the performance targets in
-- benches/README.md): what a new route writes, and how much WAL that
-- takes, without changing any answer.
--
-- Every route decided through one (catalog revision, binding, replica)
-- copies the same values: its tenant and capability, its destination
-- and its policy snapshot. Within one catalog revision a binding names
-- one tenant, capability, instance, priority, policy and credential
-- (every catalog change raises the revision, under the catalog's
-- exclusive lock), and a replica's spec never changes once registered
-- (`data_replica_register` answers `conflict` to any other), its
-- capacity class among it, which every eligible request matches.
--
-- * Those values move into `connreg.route_snapshots`, one immutable row
--   per (replica, binding, catalog revision, capacity class), never
--   updated and never deleted. A route's row keeps only what is its own:
--   the action, its snapshot's `snapshot_id`, the reservation (fence,
--   attempt, reserved, last settlement) and its scopes. A new route
--   writes a row of well under half the width it had, and a snapshot
--   only when it is the first route of its key.
-- * The decision looks its snapshot up by the key (an index read: no
--   WAL) and takes it when it holds every value the route copies; when
--   the key has none yet it inserts one (`ON CONFLICT DO NOTHING`, then
--   reads it again). A snapshot is inserted only by a decision that
--   holds its replica's row (lock order 3), so two decisions never insert
--   one key at once and the insert waits for no one; a key found with
--   other values than the decision's (which the rules above exclude) is
--   a corrupt store, never a shared answer.
-- * `connreg.routes` joins a route's row to its snapshot, with the
--   columns and their order that `connreg.assignments` had before: every
--   reader (`assignment_json`, the settlement's comparison, the answers,
--   inspection) reads it, so every answer is unchanged.
-- * Existing routes are copied: one snapshot per distinct key (a key
--   whose routes disagree on any value stops the migration), then the
--   routes into a new `connreg.assignments` whose fixed-width columns
--   come first (no padding, no dropped columns in its rows), then the old
--   table is dropped. The replica's foreign key moves to the snapshot.
--   Held reservations are indexed by snapshot (lease maintenance finds a
--   replica's snapshots by the snapshots' key, which leads with the
--   replica).
-- * A route's row names its snapshot without a foreign key: the key's
--   check would lock the snapshot's row, one more WAL record on every
--   new route, for a reference that cannot break. Routes are written by
--   the decision alone (the data role reaches no table, AUTH-6), each
--   with the snapshot it has just read or inserted, and a snapshot is
--   never updated or deleted.
--
-- Answers, lock order (0007; no snapshot row is ever locked), owners and
-- grants are unchanged; the protocol owner may insert snapshots and draw
-- their identities, and reads the new table and view like every other.

CREATE TABLE connreg.route_snapshots (
    snapshot_id bigint GENERATED ALWAYS AS IDENTITY,
    -- identity
    tenant_id text COLLATE "C" NOT NULL,
    capability_id text COLLATE "C" NOT NULL,
    -- destination
    binding_id text COLLATE "C" NOT NULL,
    instance_id text COLLATE "C" NOT NULL,
    version_id text COLLATE "C" NOT NULL,
    type_id text COLLATE "C" NOT NULL,
    replica_id text COLLATE "C" NOT NULL,
    endpoint text NOT NULL,
    peer_identity text NOT NULL,
    region text COLLATE "C" NOT NULL,
    zone text COLLATE "C" NOT NULL,
    -- policy snapshot
    catalog_revision bigint NOT NULL,
    binding_priority bigint NOT NULL,
    policy_revision bigint NOT NULL,
    credential_ref text NOT NULL,
    credential_revision bigint NOT NULL,
    secret_provider_ref text NOT NULL,
    secret_provider_revision bigint NOT NULL,
    quota_policy_ref text,
    quota_policy_revision bigint,
    capacity_class text COLLATE "C" NOT NULL,
    CONSTRAINT route_snapshots_pk PRIMARY KEY (snapshot_id),
    -- The decision's lookup, and a replica's snapshots (lease maintenance).
    CONSTRAINT route_snapshots_uk
        UNIQUE (replica_id, binding_id, catalog_revision, capacity_class),
    CONSTRAINT route_snapshots_replica_fk FOREIGN KEY (replica_id)
        REFERENCES connreg.replicas (replica_id),
    CONSTRAINT route_snapshots_quota_policy_ck
        CHECK ((quota_policy_ref IS NULL) = (quota_policy_revision IS NULL))
);

INSERT INTO connreg.route_snapshots (
    tenant_id, capability_id, binding_id, instance_id, version_id, type_id, replica_id,
    endpoint, peer_identity, region, zone, catalog_revision, binding_priority,
    policy_revision, credential_ref, credential_revision, secret_provider_ref,
    secret_provider_revision, quota_policy_ref, quota_policy_revision, capacity_class)
SELECT DISTINCT
    tenant_id, capability_id, binding_id, instance_id, version_id, type_id, replica_id,
    endpoint, peer_identity, region, zone, catalog_revision, binding_priority,
    policy_revision, credential_ref, credential_revision, secret_provider_ref,
    secret_provider_revision, quota_policy_ref, quota_policy_revision, capacity_class
  FROM connreg.assignments
 ORDER BY replica_id, binding_id, catalog_revision, capacity_class;

-- The old table's row type goes with it.
DROP FUNCTION connreg.assignment_json(connreg.assignments);
ALTER TABLE connreg.assignments RENAME TO assignments_before_snapshots;
ALTER INDEX connreg.assignments_pk RENAME TO assignments_before_snapshots_pk;
ALTER INDEX connreg.assignments_reserved_replica_ix
    RENAME TO assignments_before_snapshots_reserved_ix;

-- One route per action (REC-6, PIN-1), never deleted. Its snapshot is
-- fixed when the route is written; only the reservation columns (fence,
-- attempt, reserved, last_settlement) change afterwards.
CREATE TABLE connreg.assignments (
    snapshot_id bigint NOT NULL,
    fence bigint NOT NULL,
    attempt bigint NOT NULL,
    reserved boolean NOT NULL,
    action_id text COLLATE "C" NOT NULL,
    last_settlement text,
    -- The admission scopes each reservation of the route takes (REC-8,
    -- PIN-3), sorted.
    scopes text[] COLLATE "C" NOT NULL,
    CONSTRAINT assignments_pk PRIMARY KEY (action_id),
    CONSTRAINT assignments_attempt_ck CHECK (attempt >= 1),
    CONSTRAINT assignments_last_settlement_ck CHECK (
        last_settlement IN ('completed', 'outcome_unknown', 'cancelled', 'lease_expired'))
);
-- Held reservations by snapshot, so by replica: lease maintenance releases
-- them (LEASE-2), status counts them (AUTH-5).
CREATE INDEX assignments_reserved_snapshot_ix
    ON connreg.assignments (snapshot_id)
    WHERE reserved;

INSERT INTO connreg.assignments (snapshot_id, fence, attempt, reserved, action_id,
    last_settlement, scopes)
SELECT s.snapshot_id, a.fence, a.attempt, a.reserved, a.action_id, a.last_settlement,
       a.scopes
  FROM connreg.assignments_before_snapshots a
  JOIN connreg.route_snapshots s
    ON s.replica_id = a.replica_id AND s.binding_id = a.binding_id
   AND s.catalog_revision = a.catalog_revision AND s.capacity_class = a.capacity_class
 ORDER BY a.action_id;
DROP TABLE connreg.assignments_before_snapshots;

-- A route as answered: its row and its snapshot, in the columns of the
-- route table before this migration.
CREATE VIEW connreg.routes AS
SELECT a.action_id, s.tenant_id, s.capability_id, s.binding_id, s.instance_id,
       s.version_id, s.type_id, s.replica_id, s.endpoint, s.peer_identity, s.region,
       s.zone, s.catalog_revision, s.binding_priority, s.policy_revision,
       s.credential_ref, s.credential_revision, s.secret_provider_ref,
       s.secret_provider_revision, s.quota_policy_ref, s.quota_policy_revision,
       s.capacity_class, a.fence, a.attempt, a.reserved, a.last_settlement, a.scopes
  FROM connreg.assignments a
  JOIN connreg.route_snapshots s ON s.snapshot_id = a.snapshot_id;

-- The decision of 0011, with a new route's fixed part in its snapshot.
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
    v_snapshot bigint;
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
    IF p_commit_order THEN
        commit_seq := nextval('connreg.commit_order');
    END IF;
    RETURN NEXT;
END
$$;

-- ROUTE-2..ROUTE-7 as in 0011, the held route read with its snapshot.
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
          FROM connreg.routes a
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

-- The route columns a settlement compares (SETTLE-2), as before, of a
-- route as answered.
CREATE FUNCTION connreg.assignment_json(a connreg.routes) RETURNS jsonb
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
REVOKE ALL ON FUNCTION connreg.assignment_json(connreg.routes) FROM PUBLIC;

-- PIN-5, PIN-6: one action's route, only for its own tenant (the
-- snapshot's).
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
    FROM connreg.routes a
    WHERE a.action_id = p_action AND a.tenant_id = p_tenant
$$;

-- SETTLE-1..SETTLE-5, as in 0011, the route compared with its snapshot.
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
    PERFORM pg_advisory_xact_lock(1668182530, ('x' || left(md5(v_action), 8))::bit(32)::integer);
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

-- LEASE-2, as in 0011: a replica's held routes found through its
-- snapshots, and only the routes' rows locked.
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
        SELECT a.action_id
          FROM connreg.route_snapshots s
          JOIN connreg.assignments a ON a.snapshot_id = s.snapshot_id
         WHERE a.reserved AND s.replica_id = ANY(v_expired)
         ORDER BY a.action_id
         FOR UPDATE OF a);
    -- What is released, named, before it changes.
    SELECT coalesce(jsonb_agg(jsonb_build_object(
               'action', a.action_id, 'fence', a.fence, 'replica', a.replica_id,
               'scopes', to_jsonb(a.scopes))
               ORDER BY a.action_id), '[]'::jsonb)::text
      INTO v_releases
      FROM connreg.routes a WHERE a.action_id = ANY(v_actions);
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
      FROM (SELECT e.replica_id, (SELECT count(*) FROM connreg.routes a
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

-- As in 0011, with the snapshots: inserted by the decision, their
-- identities drawn from their sequence.
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
    EXECUTE format('GRANT INSERT ON connreg.route_snapshots TO %I', owner);
    EXECUTE format('GRANT USAGE ON SEQUENCE connreg.fence_tokens, connreg.commit_order, '
                   'connreg.route_snapshots_snapshot_id_seq TO %I', owner);
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

UPDATE connreg.schema_version SET version = 12;
