-- nodereg schema, version 16: one meaning of "a node's latest profile", used by every reader.
-- Before, eight queries each took max(profile_id), the profile inserted last: an old profile
-- imported later, or a partial `profile --kernels/--threads` run (mode 'custom'), became the
-- profile every reference used, and the similarity and corredor models could project one node
-- from different measurements (one per node, the other per host).
-- v_latest_profile: one row per node, host (the host NULL where unknown) and suite (profiles.suite,
-- schema 14: 'nodereg' for our kernels, else an imported suite), the profile measured last there
-- (started_at, then insertion order), full profiles before partial ones: a partial profile is used
-- only where the host has no other. `newest` marks each node's one row that a per-node reader of
-- our kernels' figures takes (our kernels before an imported suite, then the host measured last,
-- full before partial); `newest_in_suite` the same within each suite (what `match --suite` reads).
-- v_host_profile (and through it v_profile, v_nodes, v_hosts) reads it; its columns are unchanged,
-- so it is replaced in place (CREATE OR REPLACE keeps the views built on it, in both databases).
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
SELECT node_id, host, suite, profile_id, mode, started_at,
       row_number() OVER (PARTITION BY node_id ORDER BY CASE WHEN suite = 'nodereg' THEN 0 ELSE 1 END, partial,
                                                        started_at DESC NULLS LAST, profile_id DESC) = 1 AS newest,
       row_number() OVER (PARTITION BY node_id, suite ORDER BY partial, started_at DESC NULLS LAST,
                                                               profile_id DESC) = 1                   AS newest_in_suite
FROM (SELECT p.node_id, p.host, COALESCE(p.suite, 'nodereg') AS suite, p.profile_id, p.mode, p.started_at,
             CASE WHEN p.mode = 'custom' THEN 1 ELSE 0 END AS partial,
             row_number() OVER (PARTITION BY p.node_id, p.host, COALESCE(p.suite, 'nodereg')
                                ORDER BY CASE WHEN p.mode = 'custom' THEN 1 ELSE 0 END,
                                         p.started_at DESC NULLS LAST, p.profile_id DESC) AS k
      FROM profiles p) ranked
WHERE k = 1
;
CREATE OR REPLACE VIEW v_host_profile AS
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
