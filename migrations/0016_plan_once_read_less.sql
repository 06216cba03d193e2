-- Fewer parses, plans and plan nodes on every resolve (the profile is in
-- benches/README.md, "PostgreSQL resolves, profiled").
--
-- * `protocol_lock` becomes PL/pgSQL. As a SQL function it was parsed,
--   analysed and planned again on every call: PostgreSQL 15 keeps a SQL
--   function's plan only while the statement that called it runs, and
--   each call from its callers' PL/pgSQL is a statement of its own. In a
--   profile of 16 clients resolving new routes that was a tenth of the
--   server's time. PL/pgSQL keeps the plan for the session. The row it
--   locks and the lock's mode are unchanged (LOCK-1).
-- * A held route's lock-free `existing` answer (LOCK-5, migration 0015)
--   reads its place in the commit order with `data_read_position()`, in
--   the same statement and so the same snapshot, behind a one-time filter
--   on `p_commit_order`: a serving call no longer starts the position's
--   aggregate, series and anti-join only to discard them. A serving
--   answer now carries no `read_unseen` at all instead of an empty one,
--   as it carries no `read_seq`. The route's read and filters, and every
--   other line of `data_route_resolve`, stay exactly 0015's: the
--   definition is edited where it is stored, and the edit must find the
--   replaced text exactly once.

CREATE OR REPLACE FUNCTION connreg.protocol_lock(p_class integer, p_id text) RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM 1 FROM connreg.protocol_locks l
     WHERE l.lock_class = p_class
       AND l.slot = ('x' || left(md5(p_id), 8))::bit(32)::integer & 65535
       FOR NO KEY UPDATE;
END
$$;
REVOKE ALL ON FUNCTION connreg.protocol_lock(integer, text) FROM PUBLIC;

DO $edit$
DECLARE
    v_def text := pg_get_functiondef('connreg.data_route_resolve(text, text, text, bigint, '
        'text, boolean, text, text, boolean)'::regprocedure);
    -- The position's two common table expressions go,
    v_with text := $old$    WITH seen AS (
        SELECT max(o.seq) AS top FROM connreg.observed_commits o WHERE p_commit_order
    ), unseen AS (
        -- The sequences below the highest seen that this snapshot does not
        -- show, within the last 256: commits still in progress when it
        -- was taken, and sequences whose transaction rolled back.
        SELECT array_agg(g.seq ORDER BY g.seq) AS seqs
          FROM seen, generate_series(greatest(seen.top - 255, 1), seen.top) AS g(seq)
         WHERE NOT EXISTS (SELECT 1 FROM connreg.observed_commits o WHERE o.seq = g.seq)
    )
$old$;
    -- and the answer's last two columns come from the filtered call.
    v_from text := $old$NULL::bigint, seen.top,
           coalesce(unseen.seqs, '{}')
      FROM connreg.routes a, seen, unseen
$old$;
    v_to text := $new$NULL::bigint, p.read_seq, p.read_unseen
      FROM connreg.routes a
      -- Where this snapshot falls in the commit order, for an observing
      -- caller only (a one-time filter: never run otherwise).
      LEFT JOIN LATERAL (SELECT * FROM connreg.data_read_position()
                          WHERE p_commit_order) p ON true
$new$;
BEGIN
    IF cardinality(string_to_array(v_def, v_with)) <> 2
       OR cardinality(string_to_array(v_def, v_from)) <> 2 THEN
        RAISE EXCEPTION 'data_route_resolve does not read its position exactly once as 0015 wrote it';
    END IF;
    EXECUTE replace(replace(v_def, v_with, ''), v_from, v_to);
END
$edit$;

UPDATE connreg.schema_version SET version = 16;
