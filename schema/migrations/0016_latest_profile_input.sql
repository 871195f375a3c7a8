-- nodereg schema, version 16: one meaning of "a node's latest profile", used by every reader.
-- Before, eight queries each took max(profile_id), the profile inserted last: an old profile
-- imported later, or a partial `profile --kernels/--threads` run (mode 'custom'), became the
-- profile every reference used, and the similarity and corredor models could project one node
-- from different measurements (one per node, the other per host).
-- v_latest_profile: one row per node and host (the host NULL where unknown), the profile measured
-- last there (started_at, then insertion order), full profiles before partial ones: a partial
-- profile is used only where the host has no other. `newest` marks each node's one row that a
-- per-node reader takes (the host measured last, again full before partial).
-- The analyst views of version 11 are recreated unchanged but for reading it.
-- Workload identity: a run and a trace name the input the app ran on (`--input LABEL`, else 'cmd:'
-- and a digest of the command line and the sizes of the files it names; NULL: unknown, as for runs
-- added before), so that base times and `accuracy` compare runs of one input only. A CSV row's
-- import_key makes importing the same file twice add nothing (registry/runs.py).
-- Portable SQL: DuckDB and PostgreSQL.
ALTER TABLE runs ADD COLUMN input VARCHAR
;
ALTER TABLE runs ADD COLUMN import_key VARCHAR
;
ALTER TABLE traces ADD COLUMN input VARCHAR
;
CREATE VIEW v_latest_profile AS
SELECT node_id, host, profile_id, mode, started_at,
       row_number() OVER (PARTITION BY node_id ORDER BY partial, started_at DESC NULLS LAST, profile_id DESC) = 1
                                                                                         AS newest
FROM (SELECT p.node_id, p.host, p.profile_id, p.mode, p.started_at,
             CASE WHEN p.mode = 'custom' THEN 1 ELSE 0 END AS partial,
             row_number() OVER (PARTITION BY p.node_id, p.host
                                ORDER BY CASE WHEN p.mode = 'custom' THEN 1 ELSE 0 END,
                                         p.started_at DESC NULLS LAST, p.profile_id DESC) AS k
      FROM profiles p) ranked
WHERE k = 1
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
JOIN v_latest_profile latest ON latest.profile_id = r.profile_id
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
