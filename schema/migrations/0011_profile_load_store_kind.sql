-- nodereg schema, version 11: what the host was doing while a profile was measured, and which
-- store kind a bandwidth row used.
-- A profile measured beside other work is slow and noisy; `nodereg profile` now looks at the host
-- before and during the run (registry/measure/load.py) and stores what it saw, as JSON:
-- {"other_cpus": CPUs busy with other work, "loadavg_1m", "measurers": other nodereg measurements,
--  "busy": why the host counted as busy, or null}. NULL: measured before this version.
-- v_profile gains store_kind: beyond the last-level cache every writing bandwidth kernel is measured
-- with ordinary and with non-temporal stores, and the two rows differed only in config_key.
-- The views keep version 8's shape (a node type's figures are the median over its hosts) with
-- store_kind added; memory_triad_gbs is the node's memory bandwidth by one definition, the one the
-- node report and its roofline quote (registry/report/curves.py memory_bandwidth): triad at the
-- most threads measured and its largest working set there, the better store kind (it mixed thread
-- counts before).
ALTER TABLE profiles ADD COLUMN host_load_json VARCHAR
;
DROP VIEW v_hosts
;
DROP VIEW v_nodes
;
DROP VIEW v_profile
;
DROP VIEW v_host_profile
;
CREATE VIEW v_host_profile AS
SELECT n.name            AS node,
       p.host            AS host,
       u.name            AS ub,
       u.family          AS family,
       c.config_key      AS config_key,
       c.threads         AS threads,
       c.placement       AS placement,
       c.ws_bytes        AS ws_bytes,
       CASE WHEN c.params_json LIKE '%"nt": 1%' THEN 'non-temporal'
            WHEN u.name IN ('copy', 'scale', 'add', 'triad', 'store') THEN 'ordinary'
       END               AS store_kind,
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
JOIN (SELECT max(profile_id) AS profile_id FROM profiles GROUP BY node_id, host) latest
                       ON latest.profile_id = r.profile_id
JOIN profiles p        ON p.profile_id = r.profile_id
JOIN nodes n           ON n.node_id = p.node_id
JOIN ub_configs c      ON c.config_id = r.config_id
JOIN microbenchmarks u ON u.ub_id = c.ub_id
;
CREATE VIEW v_profile AS
SELECT node, ub, family, config_key, threads, placement, ws_bytes, store_kind,
       min(reps)                                                    AS reps,
       percentile_cont(0.5) WITHIN GROUP (ORDER BY median_s)        AS median_s,
       min(min_s)                                                   AS min_s,
       percentile_cont(0.5) WITHIN GROUP (ORDER BY cv)              AS cv,
       percentile_cont(0.5) WITHIN GROUP (ORDER BY tpi_us)          AS tpi_us,
       percentile_cont(0.5) WITHIN GROUP (ORDER BY bandwidth_gbs)   AS bandwidth_gbs,
       percentile_cont(0.5) WITHIN GROUP (ORDER BY gflops)          AS gflops,
       percentile_cont(0.5) WITHIN GROUP (ORDER BY latency_ns)      AS latency_ns,
       bool_or(unstable)                                            AS unstable,
       CASE WHEN count(*) = 1 THEN min(profile_uid) END             AS profile_uid,
       max(measured_at)                                             AS measured_at,
       count(*)                                                     AS hosts
FROM v_host_profile
GROUP BY node, ub, family, config_key, threads, placement, ws_bytes, store_kind
;
CREATE VIEW v_nodes AS
SELECT n.name, n.cpu_model, n.n_cpus, n.cores, n.sockets, n.memory_bytes, n.cpu_list, n.host, n.source,
       (SELECT count(*) FROM profiles p WHERE p.node_id = n.node_id)                     AS profiles,
       (SELECT max(p.started_at) FROM profiles p WHERE p.node_id = n.node_id)            AS last_profiled,
       (SELECT max(v.bandwidth_gbs) FROM v_profile v WHERE v.node = n.name AND v.ub = 'triad'
          AND v.threads = (SELECT max(t.threads) FROM v_profile t WHERE t.node = n.name AND t.ub = 'triad')
          AND v.ws_bytes = (SELECT max(w.ws_bytes) FROM v_profile w
                            WHERE w.node = n.name AND w.ub = 'triad' AND w.threads = v.threads))
                                                                                         AS memory_triad_gbs,
       (SELECT max(v.gflops) FROM v_profile v WHERE v.node = n.name AND v.ub = 'peak_fma')   AS best_fp64_gflops,
       (SELECT count(*) FROM runs r WHERE r.node_id = n.node_id)                         AS measured_runs,
       (SELECT count(DISTINCT coalesce(p.host, '')) FROM profiles p WHERE p.node_id = n.node_id) AS hosts
FROM nodes n
;
CREATE VIEW v_hosts AS
SELECT h.node, h.host, h.profiles, h.last_profiled,
       (SELECT max(v.bandwidth_gbs) FROM v_host_profile v
        WHERE v.node = h.node AND v.host IS NOT DISTINCT FROM h.host AND v.ub = 'triad'
          AND v.threads = (SELECT max(t.threads) FROM v_host_profile t
                           WHERE t.node = h.node AND t.host IS NOT DISTINCT FROM h.host AND t.ub = 'triad')
          AND v.ws_bytes = (SELECT max(w.ws_bytes) FROM v_host_profile w
                            WHERE w.node = h.node AND w.host IS NOT DISTINCT FROM h.host AND w.ub = 'triad'
                              AND w.threads = v.threads))
                                                                                         AS memory_triad_gbs,
       (SELECT max(v.gflops) FROM v_host_profile v
        WHERE v.node = h.node AND v.host IS NOT DISTINCT FROM h.host AND v.ub = 'peak_fma') AS best_fp64_gflops
FROM (SELECT n.name AS node, p.host, count(*) AS profiles, max(p.started_at) AS last_profiled
      FROM profiles p JOIN nodes n ON n.node_id = p.node_id
      GROUP BY n.name, p.host) h
;
