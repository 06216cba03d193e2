-- A route's admission scopes are kept once in its shared snapshot instead
-- of in every route's row (benches/README.md, "Migration 0020"): less WAL
-- per new route, nothing stored that can be derived.
--
-- A snapshot is one (replica, binding, catalog revision, capacity class),
-- and a binding's scopes are part of the catalog at a revision (REC-4), so
-- every route of a snapshot was reserved on the same scopes. A pinned
-- retry reserves its route's scopes again (PIN-3), still its snapshot's.
--
-- * `connreg.route_snapshots.scopes`, filled from the snapshot's routes
--   (which must all agree, or the migration fails naming one), or for a
--   snapshot no route names, from its binding as published now: only a
--   decision at the current revision can choose such a snapshot again.
-- * `connreg.routes` reads the scopes from the snapshot; every reader of
--   a route (answers, settlement's check, pinned retries) goes through
--   it and is unchanged.
-- * The decision writes the scopes with a new snapshot and matches them
--   when it reuses one (a snapshot of its key with other scopes is a
--   corrupt store, as for every other value); the route's row no longer
--   has them.
-- * Lease maintenance reads a released route's scopes from its snapshot.
--
-- Every edit must find the replaced text exactly once.

ALTER TABLE connreg.route_snapshots ADD COLUMN scopes text[] COLLATE "C";

UPDATE connreg.route_snapshots s
   SET scopes = coalesce(
       (SELECT a.scopes FROM connreg.assignments a
         WHERE a.snapshot_id = s.snapshot_id
         ORDER BY a.action_id LIMIT 1),
       ARRAY(SELECT bs.scope_id FROM connreg.binding_scopes bs
              WHERE bs.binding_id = s.binding_id ORDER BY bs.scope_id));

DO $check$
DECLARE
    v_action text;
BEGIN
    SELECT a.action_id INTO v_action
      FROM connreg.assignments a
      JOIN connreg.route_snapshots s ON s.snapshot_id = a.snapshot_id
     WHERE a.scopes IS DISTINCT FROM s.scopes
     ORDER BY a.action_id LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'corrupt store: route % has other scopes than its snapshot''s other routes',
            v_action;
    END IF;
END
$check$;

ALTER TABLE connreg.route_snapshots ALTER COLUMN scopes SET NOT NULL;

CREATE OR REPLACE VIEW connreg.routes AS
 SELECT a.action_id,
    s.tenant_id,
    s.capability_id,
    s.binding_id,
    s.instance_id,
    s.version_id,
    s.type_id,
    s.replica_id,
    s.endpoint,
    s.peer_identity,
    s.region,
    s.zone,
    s.catalog_revision,
    s.binding_priority,
    s.policy_revision,
    s.credential_ref,
    s.credential_revision,
    s.secret_provider_ref,
    s.secret_provider_revision,
    s.quota_policy_ref,
    s.quota_policy_revision,
    s.capacity_class,
    a.fence,
    a.attempt,
    a.reserved,
    a.last_settlement,
    s.scopes
   FROM connreg.assignments a
     JOIN connreg.route_snapshots s ON s.snapshot_id = a.snapshot_id;

DO $edit$
DECLARE
    v_sig regprocedure := 'connreg.route_decide_round(text, text, text, bigint, text, '
        'boolean, text, text, integer, integer, integer, boolean)'::regprocedure;
    v_def text := pg_get_functiondef(v_sig);
    v_edits text[][] := ARRAY[
        [$old$               AND s.quota_policy_revision IS NOT DISTINCT FROM cand.quota_policy_revision;
$old$, $new$               AND s.quota_policy_revision IS NOT DISTINCT FROM cand.quota_policy_revision
               AND s.scopes = v_scopes;
$new$],
        [$old$                quota_policy_ref, quota_policy_revision, capacity_class)
$old$, $new$                quota_policy_ref, quota_policy_revision, capacity_class, scopes)
$new$],
        [$old$                cand.quota_policy_revision, p_capacity_class)
$old$, $new$                cand.quota_policy_revision, p_capacity_class, v_scopes)
$new$],
        [$old$            snapshot_id, fence, attempt, reserved, action_id, scopes, reserved_at_ms)
        VALUES (
            v_snapshot, nextval('connreg.fence_tokens'), 1, true, p_action, v_scopes, p_now_ms)
$old$, $new$            snapshot_id, fence, attempt, reserved, action_id, reserved_at_ms)
        VALUES (
            v_snapshot, nextval('connreg.fence_tokens'), 1, true, p_action, p_now_ms)
$new$]];
BEGIN
    FOR i IN 1..array_length(v_edits, 1) LOOP
        IF cardinality(string_to_array(v_def, v_edits[i][1])) <> 2 THEN
            RAISE EXCEPTION 'route_decide_round is not as 0019 left it (edit %)', i;
        END IF;
        v_def := replace(v_def, v_edits[i][1], v_edits[i][2]);
    END LOOP;
    EXECUTE v_def;

    v_sig := 'connreg.data_lease_maintain(bigint, integer, bigint)'::regprocedure;
    v_def := pg_get_functiondef(v_sig);
    v_edits := ARRAY[
        [$old$'scopes', to_jsonb(a.scopes), 'reason', 'lease_expired')$old$,
         $new$'scopes', to_jsonb(s.scopes), 'reason', 'lease_expired')$new$],
        [$old$      WHERE c.scope_id IN (SELECT DISTINCT u.scope_id FROM connreg.assignments a,
                                  unnest(a.scopes) AS u(scope_id)
$old$, $new$      WHERE c.scope_id IN (SELECT DISTINCT u.scope_id FROM connreg.assignments a
                             JOIN connreg.route_snapshots s ON s.snapshot_id = a.snapshot_id,
                                  unnest(s.scopes) AS u(scope_id)
$new$],
        [$old$              FROM connreg.assignments a, unnest(a.scopes) AS u(scope_id)
$old$, $new$              FROM connreg.assignments a
              JOIN connreg.route_snapshots s ON s.snapshot_id = a.snapshot_id,
                   unnest(s.scopes) AS u(scope_id)
$new$],
        [$old$SELECT s.replica_id, a.scopes, a.reserved, a.fence$old$,
         $new$SELECT s.replica_id, s.scopes, a.reserved, a.fence$new$]];
    FOR i IN 1..array_length(v_edits, 1) LOOP
        IF cardinality(string_to_array(v_def, v_edits[i][1])) <> 2 THEN
            RAISE EXCEPTION 'data_lease_maintain is not as 0017 left it (edit %)', i;
        END IF;
        v_def := replace(v_def, v_edits[i][1], v_edits[i][2]);
    END LOOP;
    EXECUTE v_def;
END
$edit$;

ALTER TABLE connreg.assignments DROP COLUMN scopes;

UPDATE connreg.schema_version SET version = 20;
