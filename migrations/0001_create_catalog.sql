-- The catalog: connector types, admitted versions and what they implement,
-- capability definitions, tenant instances, bindings and admission scopes,
-- plus the one catalog revision (CAT-1) and the schema version the backend
-- checks before it serves (AUTH-3).
--
-- Every object lives in the `connreg` schema and is owned by the control
-- role, which alone changes it. The data role only reads these tables, except
-- `admission_counters`, whose counts it moves; the limits it counts against
-- stay in `admission_scopes`, which it cannot write (AUTH-2).
--
-- Identifiers are `text COLLATE "C"`: they compare as bytes, which is the
-- order the registry documents (ROUTE-10, CAT-8), and their indexes serve
-- that order. No column holds a credential or secret value: credentials,
-- secret providers, configuration and quota policies appear only as an
-- opaque reference and its revision (REC-7).
--
-- References between catalog rows are DEFERRABLE INITIALLY DEFERRED: one
-- publication may name a record that a later change of the same publication
-- creates; the backend reports a missing reference itself, before commit.

CREATE TABLE connreg.schema_version (
    singleton boolean NOT NULL DEFAULT true,
    version integer NOT NULL,
    CONSTRAINT schema_version_pk PRIMARY KEY (singleton),
    CONSTRAINT schema_version_singleton_ck CHECK (singleton)
);
INSERT INTO connreg.schema_version (version) VALUES (1);

CREATE TABLE connreg.catalog_state (
    singleton boolean NOT NULL DEFAULT true,
    revision bigint NOT NULL,
    CONSTRAINT catalog_state_pk PRIMARY KEY (singleton),
    CONSTRAINT catalog_state_singleton_ck CHECK (singleton),
    CONSTRAINT catalog_state_revision_ck CHECK (revision >= 0)
);
INSERT INTO connreg.catalog_state (revision) VALUES (0);

CREATE TABLE connreg.connector_types (
    type_id text COLLATE "C" NOT NULL,
    family text NOT NULL,
    owner text NOT NULL,
    enabled boolean NOT NULL,
    CONSTRAINT connector_types_pk PRIMARY KEY (type_id)
);

CREATE TABLE connreg.capability_definitions (
    capability_id text COLLATE "C" NOT NULL,
    summary text NOT NULL,
    schema_json text NOT NULL,
    active boolean NOT NULL,
    CONSTRAINT capability_definitions_pk PRIMARY KEY (capability_id)
);

CREATE TABLE connreg.connector_versions (
    version_id text COLLATE "C" NOT NULL,
    type_id text COLLATE "C" NOT NULL,
    artifact_digest text NOT NULL,
    manifest text NOT NULL,
    attestation text NOT NULL,
    active boolean NOT NULL,
    qualified boolean NOT NULL,
    CONSTRAINT connector_versions_pk PRIMARY KEY (version_id),
    CONSTRAINT connector_versions_type_fk FOREIGN KEY (type_id)
        REFERENCES connreg.connector_types (type_id) DEFERRABLE INITIALLY DEFERRED
);
CREATE INDEX connector_versions_type_ix ON connreg.connector_versions (type_id);

-- The capability set of a version (REC-2): immutable once admitted.
CREATE TABLE connreg.version_capabilities (
    version_id text COLLATE "C" NOT NULL,
    capability_id text COLLATE "C" NOT NULL,
    CONSTRAINT version_capabilities_pk PRIMARY KEY (version_id, capability_id),
    CONSTRAINT version_capabilities_version_fk FOREIGN KEY (version_id)
        REFERENCES connreg.connector_versions (version_id) DEFERRABLE INITIALLY DEFERRED,
    CONSTRAINT version_capabilities_capability_fk FOREIGN KEY (capability_id)
        REFERENCES connreg.capability_definitions (capability_id) DEFERRABLE INITIALLY DEFERRED
);
-- Internal reads of unbound definitions: versions by capability (CAT-6).
CREATE INDEX version_capabilities_capability_ix
    ON connreg.version_capabilities (capability_id, version_id);

-- The profiles a version supports (REC-2): immutable once admitted.
CREATE TABLE connreg.version_profiles (
    version_id text COLLATE "C" NOT NULL,
    profile_id text COLLATE "C" NOT NULL,
    CONSTRAINT version_profiles_pk PRIMARY KEY (version_id, profile_id),
    CONSTRAINT version_profiles_version_fk FOREIGN KEY (version_id)
        REFERENCES connreg.connector_versions (version_id) DEFERRABLE INITIALLY DEFERRED
);

CREATE TABLE connreg.instances (
    instance_id text COLLATE "C" NOT NULL,
    tenant_id text COLLATE "C" NOT NULL,
    version_id text COLLATE "C" NOT NULL,
    config_ref text NOT NULL,
    config_revision bigint NOT NULL,
    secret_provider_ref text NOT NULL,
    secret_provider_revision bigint NOT NULL,
    enabled boolean NOT NULL,
    CONSTRAINT instances_pk PRIMARY KEY (instance_id),
    -- Target of the bindings' (instance, tenant) reference: a binding's
    -- tenant owns its instance (CAT-5, ROUTE-9).
    CONSTRAINT instances_instance_tenant_uk UNIQUE (instance_id, tenant_id),
    CONSTRAINT instances_version_fk FOREIGN KEY (version_id)
        REFERENCES connreg.connector_versions (version_id) DEFERRABLE INITIALLY DEFERRED,
    CONSTRAINT instances_config_revision_ck CHECK (config_revision >= 0),
    CONSTRAINT instances_secret_provider_revision_ck CHECK (secret_provider_revision >= 0)
);
COMMENT ON COLUMN connreg.instances.secret_provider_ref IS
    'where the secret provider lives; never a secret value (REC-7)';

-- Scope definitions: what a scope counts and its limit. Control role only.
CREATE TABLE connreg.admission_scopes (
    scope_id text COLLATE "C" NOT NULL,
    tenant_id text COLLATE "C" NOT NULL,
    kind text NOT NULL,
    scope_limit bigint NOT NULL,
    CONSTRAINT admission_scopes_pk PRIMARY KEY (scope_id),
    CONSTRAINT admission_scopes_scope_tenant_uk UNIQUE (scope_id, tenant_id),
    CONSTRAINT admission_scopes_kind_ck CHECK (kind IN ('tenant', 'binding', 'instance', 'custom')),
    CONSTRAINT admission_scopes_limit_ck CHECK (scope_limit BETWEEN 0 AND 1000000)
);

-- Live counters, one per scope, apart from the limits so that the data role
-- may move counts without being able to touch a limit (AUTH-2, REC-8).
CREATE TABLE connreg.admission_counters (
    scope_id text COLLATE "C" NOT NULL,
    in_use bigint NOT NULL DEFAULT 0,
    CONSTRAINT admission_counters_pk PRIMARY KEY (scope_id),
    CONSTRAINT admission_counters_scope_fk FOREIGN KEY (scope_id)
        REFERENCES connreg.admission_scopes (scope_id),
    CONSTRAINT admission_counters_in_use_ck CHECK (in_use >= 0)
);

CREATE TABLE connreg.bindings (
    binding_id text COLLATE "C" NOT NULL,
    tenant_id text COLLATE "C" NOT NULL,
    capability_id text COLLATE "C" NOT NULL,
    instance_id text COLLATE "C" NOT NULL,
    priority bigint NOT NULL,
    policy_revision bigint NOT NULL,
    credential_ref text NOT NULL,
    credential_revision bigint NOT NULL,
    quota_policy_ref text,
    quota_policy_revision bigint,
    enabled boolean NOT NULL,
    CONSTRAINT bindings_pk PRIMARY KEY (binding_id),
    CONSTRAINT bindings_binding_tenant_uk UNIQUE (binding_id, tenant_id),
    CONSTRAINT bindings_instance_tenant_fk FOREIGN KEY (instance_id, tenant_id)
        REFERENCES connreg.instances (instance_id, tenant_id) DEFERRABLE INITIALLY DEFERRED,
    CONSTRAINT bindings_capability_fk FOREIGN KEY (capability_id)
        REFERENCES connreg.capability_definitions (capability_id) DEFERRABLE INITIALLY DEFERRED,
    CONSTRAINT bindings_priority_ck CHECK (priority BETWEEN 0 AND 4294967295),
    CONSTRAINT bindings_policy_revision_ck CHECK (policy_revision >= 0),
    CONSTRAINT bindings_credential_revision_ck CHECK (credential_revision >= 0),
    CONSTRAINT bindings_quota_policy_ck
        CHECK ((quota_policy_ref IS NULL) = (quota_policy_revision IS NULL))
);
COMMENT ON COLUMN connreg.bindings.credential_ref IS
    'where the credential lives; never a credential value (REC-7)';
-- Routing and tenant catalog reads: bindings by (tenant, capability)
-- (ROUTE-5, CAT-5).
CREATE INDEX bindings_tenant_capability_ix
    ON connreg.bindings (tenant_id, capability_id, binding_id);
-- Internal catalog reads: bindings of any tenant by capability (CAT-6).
CREATE INDEX bindings_capability_ix ON connreg.bindings (capability_id);

-- The hard admission scopes a route through a binding reserves (REC-8).
-- The scope belongs to the binding's tenant, by reference.
CREATE TABLE connreg.binding_scopes (
    binding_id text COLLATE "C" NOT NULL,
    scope_id text COLLATE "C" NOT NULL,
    tenant_id text COLLATE "C" NOT NULL,
    CONSTRAINT binding_scopes_pk PRIMARY KEY (binding_id, scope_id),
    CONSTRAINT binding_scopes_binding_fk FOREIGN KEY (binding_id, tenant_id)
        REFERENCES connreg.bindings (binding_id, tenant_id) DEFERRABLE INITIALLY DEFERRED,
    CONSTRAINT binding_scopes_scope_fk FOREIGN KEY (scope_id, tenant_id)
        REFERENCES connreg.admission_scopes (scope_id, tenant_id) DEFERRABLE INITIALLY DEFERRED
);
