-- nodereg schema, version 21: a node's FP64 peak by one definition, the memory bandwidth's.
-- v_nodes.best_fp64_gflops (and v_hosts') was the maximum of peak_fma over every thread count while
-- memory_triad_gbs is taken at the most threads measured (version 11), and the profile's summary and
-- the reports quoted other values again. Both figures now follow one rule: the kernel at the most
-- threads measured, the better configuration there (placement; for triad its largest working set and
-- the better store kind). The column is renamed fp64_gflops, as the web's node table calls it: it is
-- no longer "the best" over thread counts, and a query of the old name fails rather than reads a
-- figure that changed meaning. registry/report/curves.py fp_peak computes the same from a profile.
-- PostgreSQL cannot rename a view's column in CREATE OR REPLACE: the two views are dropped and made
-- again (no view reads them). Portable SQL: DuckDB and PostgreSQL.
DROP VIEW v_hosts
;
DROP VIEW v_nodes
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
       (SELECT max(v.gflops) FROM v_profile v WHERE v.node = n.name AND v.ub = 'peak_fma'
          AND v.threads = (SELECT max(t.threads) FROM v_profile t
                           WHERE t.node = n.name AND t.ub = 'peak_fma' AND t.gflops IS NOT NULL))
                                                                                         AS fp64_gflops,
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
        WHERE v.node = h.node AND v.host IS NOT DISTINCT FROM h.host AND v.ub = 'peak_fma'
          AND v.threads = (SELECT max(t.threads) FROM v_host_profile t
                           WHERE t.node = h.node AND t.host IS NOT DISTINCT FROM h.host AND t.ub = 'peak_fma'
                             AND t.gflops IS NOT NULL))                                  AS fp64_gflops
FROM (SELECT n.name AS node, p.host, count(*) AS profiles, max(p.started_at) AS last_profiled
      FROM profiles p JOIN nodes n ON n.node_id = p.node_id
      GROUP BY n.name, p.host) h
;
