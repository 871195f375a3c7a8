-- nodereg schema, version 13: v_predictions compares a prediction with the runs at the thread count
-- the app runs with on that node, as `nodereg accuracy` does (registry/accuracy.py).
-- Before, it took the prediction's own `threads`: the count its phases were projected at, 1 for an
-- app whose phases did not keep the base CPUs busy, so such an app's prediction on a 2-CPU node met
-- runs at 1 thread, which `nodereg run` never stores there (it starts the app with one thread per
-- CPU of the node, or with the count the user fixed). Now: the count fixed when tracing
-- (traces.threads), else the node's CPU count. The columns are unchanged.
-- Portable SQL: DuckDB and PostgreSQL.
DROP VIEW v_predictions
;
CREATE VIEW v_predictions AS
SELECT a.name AS app, t.uid AS trace_uid, b.name AS base_node, n.name AS node,
       p.model_name, p.model_version, p.threads, p.predicted_s, p.low_s, p.high_s,
       p.node_rank, p.coverage, p.created_at, p.inputs_digest,
       m.runs AS measured_runs, m.median_s AS measured_s, abs(p.predicted_s - m.median_s) / m.median_s AS abs_rel_error
FROM predictions p
JOIN apps a        ON a.app_id = p.app_id
JOIN nodes n       ON n.node_id = p.node_id
LEFT JOIN traces t ON t.trace_id = p.trace_id
LEFT JOIN nodes b  ON b.node_id = p.base_node_id
LEFT JOIN v_runs m ON m.app = a.name AND m.node = n.name AND m.threads = COALESCE(t.threads, n.n_cpus)
