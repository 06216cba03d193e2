-- The data role's privileges, in one place (AUTH-2).
--
-- `connreg.grant_data_role(role)` first revokes everything the role holds on
-- the schema's objects, then grants exactly: reads of the catalog; inserts
-- and updates of replicas limited to their live columns; inserts of routes
-- and updates of their reservation columns only; updates of admission
-- counters (never of the limits); fence tokens; the audit log. It grants no
-- CREATE on the schema, so PostgreSQL itself refuses the data role any
-- catalog, admission or schema change.
--
-- The control role (owner) runs it after migrating, for the data role the
-- deployment names; EXECUTE is not granted to anyone else.

CREATE FUNCTION connreg.grant_data_role(data_role text) RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog
AS $$
BEGIN
    EXECUTE format('REVOKE ALL ON ALL TABLES IN SCHEMA connreg FROM %I', data_role);
    EXECUTE format('REVOKE ALL ON ALL SEQUENCES IN SCHEMA connreg FROM %I', data_role);
    EXECUTE format('REVOKE ALL ON SCHEMA connreg FROM %I', data_role);

    EXECUTE format('GRANT USAGE ON SCHEMA connreg TO %I', data_role);
    EXECUTE format(
        'GRANT SELECT ON connreg.schema_version, connreg.catalog_state, '
        'connreg.connector_types, connreg.capability_definitions, '
        'connreg.connector_versions, connreg.version_capabilities, '
        'connreg.version_profiles, connreg.instances, connreg.admission_scopes, '
        'connreg.bindings, connreg.binding_scopes TO %I', data_role);
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
END
$$;
REVOKE ALL ON FUNCTION connreg.grant_data_role(text) FROM PUBLIC;

UPDATE connreg.schema_version SET version = 3;
