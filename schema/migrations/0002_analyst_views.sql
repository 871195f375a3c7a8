-- Analyst views (documented in schema/README.md). Portable SQL: DuckDB and PostgreSQL.

-- One row per node x microbenchmark config, from the node's latest profile.
CREATE VIEW v_profile AS
SELECT n.name            AS node,
       u.name            AS ub,
       u.family          AS family,
       c.config_key      AS config_key,
       c.threads         AS threads,
       c.placement       AS placement,
       c.ws_bytes        AS ws_bytes,
       r.reps            AS reps,
       r.median_s        AS median_s,
       r.min_s           AS min_s,
       r.cv              AS cv,
       r.tpi_us          AS tpi_us,
       r.bandwidth_gbs   AS bandwidth_gbs,
       r.gflops          AS gflops,
       r.latency_ns      AS latency_ns,
       r.unstable        AS unstable,
       p.uid             AS profile_uid,
       p.started_at      AS measured_at
FROM profile_runs r
JOIN profiles p        ON p.profile_id = r.profile_id
JOIN nodes n           ON n.node_id = p.node_id
JOIN ub_configs c      ON c.config_id = r.config_id
JOIN microbenchmarks u ON u.ub_id = c.ub_id
WHERE p.profile_id = (SELECT max(p2.profile_id) FROM profiles p2 WHERE p2.node_id = p.node_id);
;
-- One row per node: inventory headline and the headline figures of its latest profile
-- (STREAM triad at its largest working set, i.e. from memory; best FP64 FMA peak).
CREATE VIEW v_nodes AS
SELECT n.name, n.cpu_model, n.n_cpus, n.cores, n.sockets, n.memory_bytes, n.cpu_list, n.host, n.source,
       (SELECT count(*) FROM profiles p WHERE p.node_id = n.node_id)                     AS profiles,
       (SELECT max(p.started_at) FROM profiles p WHERE p.node_id = n.node_id)            AS last_profiled,
       (SELECT max(v.bandwidth_gbs) FROM v_profile v WHERE v.node = n.name AND v.ub = 'triad'
          AND v.ws_bytes = (SELECT max(w.ws_bytes) FROM v_profile w WHERE w.node = n.name AND w.ub = 'triad'))
                                                                                         AS memory_triad_gbs,
       (SELECT max(v.gflops) FROM v_profile v WHERE v.node = n.name AND v.ub = 'peak_fma')   AS best_fp64_gflops,
       (SELECT count(*) FROM runs r WHERE r.node_id = n.node_id)                         AS measured_runs
FROM nodes n;
;
-- Measured runs aggregated per app x node x threads.
CREATE VIEW v_runs AS
SELECT a.name AS app, n.name AS node, r.threads,
       count(*)                                                   AS runs,
       percentile_cont(0.5) WITHIN GROUP (ORDER BY r.time_s)      AS median_s,
       min(r.time_s)                                              AS min_s,
       max(r.time_s)                                              AS max_s
FROM runs r
JOIN apps a  ON a.app_id = r.app_id
JOIN nodes n ON n.node_id = r.node_id
GROUP BY a.name, n.name, r.threads;
;
-- Every stored prediction beside the measured median (when the registry has measured runs).
CREATE VIEW v_predictions AS
SELECT a.name AS app, n.name AS node, p.model_name, p.threads, p.predicted_s, p.low_s, p.high_s,
       p.node_rank, p.coverage, p.created_at,
       m.median_s                                                 AS measured_s,
       abs(p.predicted_s - m.median_s) / m.median_s               AS abs_rel_error
FROM predictions p
JOIN apps a  ON a.app_id = p.app_id
JOIN nodes n ON n.node_id = p.node_id
LEFT JOIN (
    SELECT r.app_id, r.node_id,
           percentile_cont(0.5) WITHIN GROUP (ORDER BY r.time_s) AS median_s
    FROM runs r GROUP BY r.app_id, r.node_id
) m ON m.app_id = p.app_id AND m.node_id = p.node_id;
;
-- Phases with their trace, app and node.
CREATE VIEW v_phases AS
SELECT a.name AS app, n.name AS node, t.uid AS trace_uid, t.status, t.wall_s,
       ph.idx, ph.name AS phase, ph.method, ph.start_s, ph.end_s, ph.weight, ph.time_s, ph.iterations
FROM phases ph
JOIN traces t ON t.trace_id = ph.trace_id
JOIN apps a   ON a.app_id = t.app_id
JOIN nodes n  ON n.node_id = t.node_id;
