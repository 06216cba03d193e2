-- Less WAL per call: the protocol's lock rows are unlogged.
--
-- * `connreg.protocol_locks` (migration 0013) is locked and never
--   written, yet every lock of one of its rows was a WAL record (about
--   54 bytes): the action's lock of every resolve that decides and of
--   every settlement, and the instance's lock of every registration. A
--   row lock on an unlogged table writes none. The rows only name keys:
--   nothing in them needs to survive a crash, and a lock never outlives
--   its transaction anyway.
-- * An unlogged table is empty after a crash and on a standby once it is
--   promoted. `protocol_locks_refill` makes every row again in one
--   statement, so the table is either empty or whole (rows are never
--   deleted). `protocol_lock` refills it when its row is missing, then
--   locks the row; it is the first lock of every caller (LOCK-1), so the
--   refill waits, if at all, only for another session's refill, holding
--   nothing. A missing row never means a lock not taken: past a refill
--   that still leaves it missing, the call fails.
-- * Lease maintenance takes actions' locks without waiting while it holds
--   replica rows, so it must not refill there: it refills at its start,
--   before it takes anything, and skips a reservation whose lock row is
--   missing (one truncated under it) as it skips a busy one, leaving
--   `more` set.
-- * The protocol owner may insert into the table (`install_protocol_owner`,
--   which start-up runs again after the migrations) and run the refill;
--   the data role still can do neither (AUTH-6).

ALTER TABLE connreg.protocol_locks SET UNLOGGED;

CREATE FUNCTION connreg.protocol_locks_refill() RETURNS void
LANGUAGE sql
SET search_path = pg_catalog, pg_temp
AS $$
    INSERT INTO connreg.protocol_locks (lock_class, slot)
    SELECT c, s FROM unnest(ARRAY[1668182530, 1668182531]) AS c,
                     generate_series(0, 65535) AS s
    ON CONFLICT DO NOTHING
$$;
REVOKE ALL ON FUNCTION connreg.protocol_locks_refill() FROM PUBLIC;

CREATE OR REPLACE FUNCTION connreg.protocol_lock(p_class integer, p_id text) RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_slot integer := ('x' || left(md5(p_id), 8))::bit(32)::integer & 65535;
BEGIN
    PERFORM 1 FROM connreg.protocol_locks l
     WHERE l.lock_class = p_class AND l.slot = v_slot
       FOR NO KEY UPDATE;
    IF NOT FOUND THEN
        PERFORM connreg.protocol_locks_refill();
        PERFORM 1 FROM connreg.protocol_locks l
         WHERE l.lock_class = p_class AND l.slot = v_slot
           FOR NO KEY UPDATE;
        IF NOT FOUND THEN
            RAISE EXCEPTION USING ERRCODE = 'XX000',
                MESSAGE = format('protocol lock (%s, %s) is missing after a refill',
                                 p_class, v_slot);
        END IF;
    END IF;
END
$$;
REVOKE ALL ON FUNCTION connreg.protocol_lock(integer, text) FROM PUBLIC;

DO $edit$
DECLARE
    v_def text := pg_get_functiondef(
        'connreg.data_lease_maintain(bigint, integer, bigint)'::regprocedure);
    -- Before the first lock: the expired replicas' scan.
    v_start text := $old$    FOR r IN
        SELECT x.replica_id FROM connreg.replicas x
$old$;
    v_refill text := $new$    -- An unlogged table emptied by a crash or a promotion is made whole
    -- again here, holding nothing (migration 0017).
    IF NOT EXISTS (SELECT 1 FROM connreg.protocol_locks) THEN
        PERFORM connreg.protocol_locks_refill();
    END IF;
    FOR r IN
        SELECT x.replica_id FROM connreg.replicas x
$new$;
    -- The hold loop's action lock, taken without waiting.
    v_nowait text := $old$              FOR NO KEY UPDATE NOWAIT;
$old$;
    v_missing text := $new$              FOR NO KEY UPDATE NOWAIT;
            IF NOT FOUND THEN
                RAISE EXCEPTION USING ERRCODE = '55P03',
                    MESSAGE = 'the action''s lock row is missing';
            END IF;
$new$;
BEGIN
    IF cardinality(string_to_array(v_def, v_start)) <> 2
       OR cardinality(string_to_array(v_def, v_nowait)) <> 2 THEN
        RAISE EXCEPTION 'data_lease_maintain does not scan and lock as 0014 wrote it';
    END IF;
    EXECUTE replace(replace(v_def, v_start, v_refill), v_nowait, v_missing);
END
$edit$;

DO $edit$
DECLARE
    v_def text := pg_get_functiondef('connreg.install_protocol_owner(text)'::regprocedure);
    v_insert text := $old$'GRANT INSERT ON connreg.route_snapshots, connreg.observed_commits TO %I'$old$;
    v_functions text := $old$'take_scopes_nowait', 'protocol_lock', 'assignment_json',$old$;
BEGIN
    IF cardinality(string_to_array(v_def, v_insert)) <> 2
       OR cardinality(string_to_array(v_def, v_functions)) <> 2 THEN
        RAISE EXCEPTION 'install_protocol_owner does not grant as 0015 wrote it';
    END IF;
    EXECUTE replace(replace(v_def, v_insert,
        $new$'GRANT INSERT ON connreg.route_snapshots, connreg.observed_commits, '
                   'connreg.protocol_locks TO %I'$new$),
        v_functions,
        $new$'take_scopes_nowait', 'protocol_lock', 'protocol_locks_refill',
                             'assignment_json',$new$);
END
$edit$;

UPDATE connreg.schema_version SET version = 17;
