-- Less server time per new route and settlement (benches/README.md,
-- "Migration 0019"): costs the statement statistics of a 16-client run
-- showed.
--
-- * The counters' count of a new route (and a settlement's release) was
--   planned again on every call. Its `scope_id = ANY (v_scopes)` makes the
--   generic plan look dearer to the plan cache than a plan for the array
--   at hand, so PL/pgSQL chose a fresh custom plan each time (about 40 to
--   70 us, more than the statement's own run), with the same index scan
--   as the generic one. `route_decide_round` and `data_route_settle` now
--   run with `plan_cache_mode = force_generic_plan`: every statement of
--   theirs is planned once a session. Their other statements had already
--   settled on the generic plan after five calls; the one that had not is
--   a single-row index scan whatever the array holds (at most
--   BINDING_SCOPES_MAX scopes).
-- * The candidate query joined every ready replica of the tenant's
--   instances to the binding's whole chain (instance, version, type, the
--   version's capabilities), so the chain was read once per replica. It
--   now reads the tenant's eligible bindings for the capability first,
--   each chain once, and then their replicas. The filters, the route
--   order and the answer are unchanged; only where the rows come from
--   moves. The edit must find the replaced text exactly once.
-- * `assignment_json`, with which a settlement compares the route it was
--   given with the stored one (SETTLE-2), was a SQL function with a `SET`
--   clause: it could not be inlined, so it was parsed and planned on every
--   settlement. Its body is now a standard SQL body, bound when it is
--   created (so no caller's `search_path` can reach into it) and inlined
--   into the settlement's check. The object it builds is unchanged.

DO $edit$
DECLARE
    v_def text := pg_get_functiondef('connreg.route_decide_round(text, text, text, bigint, '
        'text, boolean, text, text, integer, integer, integer, boolean)'::regprocedure);
    v_from text := $old$              FROM connreg.eligible_bindings e
              JOIN connreg.replicas r
                ON r.instance_id = e.instance_id AND r.version_id = e.version_id
             WHERE e.tenant_id = p_tenant AND e.capability_id = p_capability
               AND e.scopes_have_room AND NOT (e.binding_id = ANY (v_excluded))
               AND NOT (r.replica_id = ANY (v_skipped))
$old$;
    v_to text := $new$              -- The eligible bindings first, each chain read once
              -- (OFFSET 0 keeps the planner from reading it per replica).
              FROM (SELECT e.* FROM connreg.eligible_bindings e
                     WHERE e.tenant_id = p_tenant AND e.capability_id = p_capability
                       AND e.scopes_have_room AND NOT (e.binding_id = ANY (v_excluded))
                    OFFSET 0) e
              JOIN connreg.replicas r
                ON r.instance_id = e.instance_id AND r.version_id = e.version_id
             WHERE NOT (r.replica_id = ANY (v_skipped))
$new$;
BEGIN
    IF cardinality(string_to_array(v_def, v_from)) <> 2 THEN
        RAISE EXCEPTION 'route_decide_round does not read its candidates exactly once as 0018 wrote it';
    END IF;
    EXECUTE replace(v_def, v_from, v_to);
END
$edit$;

CREATE OR REPLACE FUNCTION connreg.assignment_json(a connreg.routes) RETURNS jsonb
LANGUAGE sql STABLE
BEGIN ATOMIC
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
        'scopes', to_jsonb(a.scopes));
END;

ALTER FUNCTION connreg.route_decide_round(text, text, text, bigint, text, boolean, text, text,
    integer, integer, integer, boolean)
    SET plan_cache_mode = force_generic_plan;
ALTER FUNCTION connreg.data_route_settle(jsonb, text, boolean, bigint)
    SET plan_cache_mode = force_generic_plan;

UPDATE connreg.schema_version SET version = 19;
