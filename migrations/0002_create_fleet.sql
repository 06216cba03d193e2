-- The fleet and the routes: replicas with their live state, route
-- assignments with the scopes they reserve, fence tokens and the operator
-- audit log. The data role writes these (through the columns it is granted);
-- the control role owns them.
--
-- Times are milliseconds of the registry's injected clock, passed in by the
-- backend (LEASE-4); nothing here reads the server's clock.

CREATE TABLE connreg.replicas (
    replica_id text COLLATE "C" NOT NULL,
    instance_id text COLLATE "C" NOT NULL,
    version_id text COLLATE "C" NOT NULL,
    endpoint text NOT NULL,
    peer_identity text NOT NULL,
    region text COLLATE "C" NOT NULL,
    zone text COLLATE "C" NOT NULL,
    capacity_class text COLLATE "C" NOT NULL,
    capacity bigint NOT NULL,
    health_seq bigint NOT NULL,
    lease_expires_at_ms bigint NOT NULL,
    active bigint NOT NULL DEFAULT 0,
    state text NOT NULL,
    circuit_open boolean NOT NULL DEFAULT false,
    consecutive_unknown bigint NOT NULL DEFAULT 0,
    CONSTRAINT replicas_pk PRIMARY KEY (replica_id),
    CONSTRAINT replicas_instance_fk FOREIGN KEY (instance_id)
        REFERENCES connreg.instances (instance_id),
    CONSTRAINT replicas_version_fk FOREIGN KEY (version_id)
        REFERENCES connreg.connector_versions (version_id),
    CONSTRAINT replicas_state_ck CHECK (state IN ('ready', 'draining', 'offline')),
    CONSTRAINT replicas_capacity_ck CHECK (capacity BETWEEN 1 AND 10000),
    CONSTRAINT replicas_active_ck CHECK (active BETWEEN 0 AND capacity),
    CONSTRAINT replicas_health_seq_ck CHECK (health_seq >= 0),
    CONSTRAINT replicas_consecutive_unknown_ck CHECK (consecutive_unknown >= 0)
-- Room on each page for HOT updates: every route reservation and release
-- rewrites `active`, which no index covers.
) WITH (fillfactor = 70);
-- Routing: the replicas serving one (instance, version), by state (ROUTE-9,
-- AUTH-4). Also counts an instance's replicas at registration.
CREATE INDEX replicas_instance_version_ix
    ON connreg.replicas (instance_id, version_id, state);
-- Lease maintenance: leases of replicas not offline, oldest first (LEASE-2).
CREATE INDEX replicas_lease_ix
    ON connreg.replicas (lease_expires_at_ms, replica_id)
    WHERE state <> 'offline';

-- Fresh for every reservation and never reused.
CREATE SEQUENCE connreg.fence_tokens AS bigint START WITH 1 CACHE 1;

-- One route per action (REC-6, PIN-1), never deleted. Identity, destination
-- and policy snapshot are written once; only the reservation columns
-- (fence, attempt, reserved, last_settlement) change afterwards, and those
-- are the only columns the data role may update.
CREATE TABLE connreg.assignments (
    action_id text COLLATE "C" NOT NULL,
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
    -- reservation
    fence bigint NOT NULL,
    attempt bigint NOT NULL,
    reserved boolean NOT NULL,
    last_settlement text,
    CONSTRAINT assignments_pk PRIMARY KEY (action_id),
    CONSTRAINT assignments_fence_uk UNIQUE (fence),
    CONSTRAINT assignments_replica_fk FOREIGN KEY (replica_id)
        REFERENCES connreg.replicas (replica_id),
    CONSTRAINT assignments_attempt_ck CHECK (attempt >= 1),
    CONSTRAINT assignments_last_settlement_ck CHECK (
        last_settlement IN ('completed', 'outcome_unknown', 'cancelled', 'lease_expired')),
    CONSTRAINT assignments_quota_policy_ck
        CHECK ((quota_policy_ref IS NULL) = (quota_policy_revision IS NULL))
);
-- Held reservations by replica: lease maintenance releases them (LEASE-2),
-- status counts them (AUTH-5).
CREATE INDEX assignments_reserved_replica_ix
    ON connreg.assignments (replica_id, action_id)
    WHERE reserved;

-- The admission scopes a route's reservation holds (REC-8). Written with the
-- route; the same set is reserved again by a pinned retry (PIN-3).
CREATE TABLE connreg.assignment_scopes (
    action_id text COLLATE "C" NOT NULL,
    scope_id text COLLATE "C" NOT NULL,
    CONSTRAINT assignment_scopes_pk PRIMARY KEY (action_id, scope_id),
    CONSTRAINT assignment_scopes_action_fk FOREIGN KEY (action_id)
        REFERENCES connreg.assignments (action_id)
);

-- Audited operator actions (SETTLE-6), newest kept, bounded by the backend.
CREATE TABLE connreg.operator_audit (
    entry_id bigint GENERATED ALWAYS AS IDENTITY,
    at_ms bigint NOT NULL,
    operator text NOT NULL,
    action text NOT NULL,
    replica_id text COLLATE "C" NOT NULL,
    reason text NOT NULL,
    CONSTRAINT operator_audit_pk PRIMARY KEY (entry_id)
);

UPDATE connreg.schema_version SET version = 2;
