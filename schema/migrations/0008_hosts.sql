-- nodereg schema, version 8: node types profiled on many hosts.
-- A node (what `match` ranks) is a node *type*; a fleet profiles it on every host that has it
-- (`nodereg fleet`), and each profile records its host (profiles.host). The type's figures are the
-- median over its hosts, each host counted once with its latest profile; per-host figures are in
-- v_host_profile and v_hosts. Portable SQL: DuckDB and PostgreSQL.

-- Profiles stored without a host (imported or made by older tools) take the host of the inventory
-- their node stored (nodes.host is that inventory's hostname), where there is one.
UPDATE profiles SET host = (SELECT n.host FROM nodes n WHERE n.node_id = profiles.node_id)
WHERE host IS NULL;
;
-- v_nodes reads v_profile: both are replaced, dependents first (PostgreSQL keeps dependencies).
DROP VIEW v_nodes;
;
DROP VIEW v_profile;
;
-- One row per node type x host x config, from the host's latest profile of that type. Profiles
-- without a known host count as one host (NULL).
CREATE VIEW v_host_profile AS
SELECT n.name            AS node,
       p.host            AS host,
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
JOIN (SELECT max(profile_id) AS profile_id FROM profiles GROUP BY node_id, host) latest
                       ON latest.profile_id = r.profile_id
JOIN profiles p        ON p.profile_id = r.profile_id
JOIN nodes n           ON n.node_id = p.node_id
JOIN ub_configs c      ON c.config_id = r.config_id
JOIN microbenchmarks u ON u.ub_id = c.ub_id;
;
-- One row per node type x config: the median over the type's hosts (what `match` and the node
-- report use). With one host these are that host's latest figures, as before version 8.
-- profile_uid is the profile's when one host measured the config, NULL when several did.
CREATE VIEW v_profile AS
SELECT node, ub, family, config_key, threads, placement, ws_bytes,
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
GROUP BY node, ub, family, config_key, threads, placement, ws_bytes;
;
-- As in version 2, with the number of hosts the type was profiled on appended.
CREATE VIEW v_nodes AS
SELECT n.name, n.cpu_model, n.n_cpus, n.cores, n.sockets, n.memory_bytes, n.cpu_list, n.host, n.source,
       (SELECT count(*) FROM profiles p WHERE p.node_id = n.node_id)                     AS profiles,
       (SELECT max(p.started_at) FROM profiles p WHERE p.node_id = n.node_id)            AS last_profiled,
       (SELECT max(v.bandwidth_gbs) FROM v_profile v WHERE v.node = n.name AND v.ub = 'triad'
          AND v.ws_bytes = (SELECT max(w.ws_bytes) FROM v_profile w WHERE w.node = n.name AND w.ub = 'triad'))
                                                                                         AS memory_triad_gbs,
       (SELECT max(v.gflops) FROM v_profile v WHERE v.node = n.name AND v.ub = 'peak_fma')   AS best_fp64_gflops,
       (SELECT count(*) FROM runs r WHERE r.node_id = n.node_id)                         AS measured_runs,
       (SELECT count(DISTINCT coalesce(p.host, '')) FROM profiles p WHERE p.node_id = n.node_id) AS hosts
FROM nodes n;
;
-- One row per node type x host: its profiles and the headline figures of its latest one.
CREATE VIEW v_hosts AS
SELECT h.node, h.host, h.profiles, h.last_profiled,
       (SELECT max(v.bandwidth_gbs) FROM v_host_profile v
        WHERE v.node = h.node AND v.host IS NOT DISTINCT FROM h.host AND v.ub = 'triad'
          AND v.ws_bytes = (SELECT max(w.ws_bytes) FROM v_host_profile w
                            WHERE w.node = h.node AND w.host IS NOT DISTINCT FROM h.host AND w.ub = 'triad'))
                                                                                         AS memory_triad_gbs,
       (SELECT max(v.gflops) FROM v_host_profile v
        WHERE v.node = h.node AND v.host IS NOT DISTINCT FROM h.host AND v.ub = 'peak_fma') AS best_fp64_gflops
FROM (SELECT n.name AS node, p.host, count(*) AS profiles, max(p.started_at) AS last_profiled
      FROM profiles p JOIN nodes n ON n.node_id = p.node_id
      GROUP BY n.name, p.host) h;
