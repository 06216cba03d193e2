-- Lease maintenance names the reservations it releases (LEASE-2): the
-- function of 0008 again, answering also `releases`, the released
-- reservations as JSON (action, fence, replica, scopes), in action order.
-- Its result type changes, so it is dropped and created again; the
-- registry's start-up (`install_protocol_owner`, `grant_data_role`) hands it
-- to the protocol owner and grants the data role EXECUTE again, as for
-- every `data_*` function.

DROP FUNCTION connreg.data_lease_maintain(bigint, integer);

CREATE FUNCTION connreg.data_lease_maintain(p_now_ms bigint, p_max integer)
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
               'scopes', to_jsonb(ARRAY(SELECT s.scope_id FROM connreg.assignment_scopes s
                                        WHERE s.action_id = a.action_id
                                        ORDER BY s.scope_id)))
               ORDER BY a.action_id), '[]'::jsonb)::text
      INTO v_releases
      FROM connreg.assignments a WHERE a.action_id = ANY(v_actions);
    PERFORM 1 FROM connreg.admission_counters c
      WHERE c.scope_id IN (SELECT s.scope_id FROM connreg.assignment_scopes s
                            WHERE s.action_id = ANY(v_actions))
      ORDER BY c.scope_id FOR UPDATE;
    UPDATE connreg.admission_counters c SET in_use = greatest(c.in_use - d.n, 0)
      FROM (SELECT s.scope_id, count(*) AS n FROM connreg.assignment_scopes s
             WHERE s.action_id = ANY(v_actions) GROUP BY s.scope_id) d
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

REVOKE ALL ON FUNCTION connreg.data_lease_maintain(bigint, integer) FROM PUBLIC;

UPDATE connreg.schema_version SET version = 10;
