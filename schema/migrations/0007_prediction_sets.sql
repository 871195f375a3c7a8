-- nodereg schema, version 7: one stored prediction set per trace, model and registry state.
-- `nodereg match` stored another identical set on every look. A set now carries the digest of what
-- it was computed from (registry/match/stored.py) and the node the trace was projected from; a look
-- at an unchanged registry stores nothing. v_predictions shows the trace and the base node, and
-- compares each prediction with the runs at its own thread count (it mixed every thread count).
-- Portable SQL: DuckDB and PostgreSQL.
ALTER TABLE predictions ADD COLUMN base_node_id BIGINT  -- -> nodes.node_id
;
ALTER TABLE predictions ADD COLUMN inputs_digest VARCHAR  -- NULL: stored before version 7
;
-- The base node of an older set: its trace's node; for a trace file that was not in the registry,
-- the "base" that `match` wrote first in every row's explanation ({"base":"NAME",...}).
UPDATE predictions SET base_node_id = (SELECT t.node_id FROM traces t WHERE t.trace_id = predictions.trace_id)
WHERE trace_id IS NOT NULL
;
UPDATE predictions SET base_node_id = (SELECT n.node_id FROM nodes n
                                       WHERE n.name = split_part(predictions.explanation_json, '"', 4))
WHERE base_node_id IS NULL AND explanation_json LIKE '{"base":"%'
;
-- Older duplicates: a set is the rows one `match` stored (same trace, app, model and time); of sets
-- with the same trace, app, model and rows, only the latest stays.
CREATE TEMPORARY TABLE prediction_sets_0007 AS
SELECT COALESCE(trace_id, -1) AS trace_key, app_id, model_name, created_at,
       md5(string_agg(CAST(node_id AS VARCHAR) || ':' || COALESCE(CAST(threads AS VARCHAR), '') || ':'
                      || CAST(predicted_s AS VARCHAR) || ':' || COALESCE(CAST(low_s AS VARCHAR), '') || ':'
                      || COALESCE(CAST(high_s AS VARCHAR), '') || ':' || COALESCE(CAST(node_rank AS VARCHAR), '')
                      || ':' || COALESCE(CAST(coverage AS VARCHAR), ''), ',' ORDER BY node_id, prediction_id)) AS rows_md5
FROM predictions
GROUP BY COALESCE(trace_id, -1), app_id, model_name, created_at
;
DELETE FROM predictions WHERE EXISTS (
    SELECT 1 FROM prediction_sets_0007 s JOIN prediction_sets_0007 later
        ON later.trace_key = s.trace_key AND later.app_id = s.app_id AND later.model_name = s.model_name
       AND later.rows_md5 = s.rows_md5 AND later.created_at > s.created_at
    WHERE s.trace_key = COALESCE(predictions.trace_id, -1) AND s.app_id = predictions.app_id
      AND s.model_name = predictions.model_name AND s.created_at = predictions.created_at)
;
DROP TABLE prediction_sets_0007
;
DROP VIEW v_predictions
;
-- Every stored prediction beside the measured median of the app's runs on that node at the
-- prediction's thread count (without one: at all the node's CPUs), as `nodereg report match` does.
CREATE VIEW v_predictions AS
SELECT a.name AS app, t.uid AS trace_uid, b.name AS base_node, n.name AS node,
       p.model_name, p.model_version, p.threads, p.predicted_s, p.low_s, p.high_s,
       p.node_rank, p.coverage, p.created_at, p.inputs_digest,
       m.runs                                                     AS measured_runs,
       m.median_s                                                 AS measured_s,
       abs(p.predicted_s - m.median_s) / m.median_s               AS abs_rel_error
FROM predictions p
JOIN apps a       ON a.app_id = p.app_id
JOIN nodes n      ON n.node_id = p.node_id
LEFT JOIN traces t ON t.trace_id = p.trace_id
LEFT JOIN nodes b ON b.node_id = p.base_node_id
LEFT JOIN (
    SELECT r.app_id, r.node_id, r.threads, count(*) AS runs,
           percentile_cont(0.5) WITHIN GROUP (ORDER BY r.time_s) AS median_s
    FROM runs r WHERE r.threads IS NOT NULL GROUP BY r.app_id, r.node_id, r.threads
) m ON m.app_id = p.app_id AND m.node_id = p.node_id AND m.threads = COALESCE(p.threads, n.n_cpus)
