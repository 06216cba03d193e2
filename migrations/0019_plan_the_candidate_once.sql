-- Less server time per new route (benches/README.md, "Migration 0019"):
-- two costs the statement statistics of a 16-client run showed.
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

ALTER FUNCTION connreg.route_decide_round(text, text, text, bigint, text, boolean, text, text,
    integer, integer, integer, boolean)
    SET plan_cache_mode = force_generic_plan;
ALTER FUNCTION connreg.data_route_settle(jsonb, text, boolean, bigint)
    SET plan_cache_mode = force_generic_plan;

UPDATE connreg.schema_version SET version = 19;
