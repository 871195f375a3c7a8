-- nodereg schema, version 22: each profile's runs packed into one row, as `nodereg match` reads them.
-- A match reads, per run of every node's latest profile, its config, cache level and throughput, and
-- per profile its count of runs, of unstable ones and its repetitions' dispersion; computed from
-- profile_runs on every match, a 10,000-node x 300-config registry is three million rows. The writer
-- of a profile packs them once (registry/profile/vectors.py: the same SQL; `data` is an array of
-- (config_id int32, level int8, throughput float64) little-endian records in run order), and this
-- migration's Python step packs the profiles already stored (registry/db/migrate.py COMPLETIONS).
-- v_profile_summary gives every profile's counts, from its packed row or else from its runs (driven by
-- the profiles without one, so that a fully packed registry's runs are not scanned).
-- Derived data: bundles leave it out and the importer packs again. Portable SQL: DuckDB and PostgreSQL
-- (BYTEA is DuckDB's BLOB).
CREATE TABLE profile_vectors (
    profile_id BIGINT PRIMARY KEY,
    runs       INTEGER NOT NULL,            -- runs packed in data
    unstable   INTEGER NOT NULL,            -- of which flagged unstable
    cv_runs    INTEGER NOT NULL,            -- runs with a coefficient of variation
    cv2_sum    DOUBLE PRECISION,            -- the sum of their squared coefficients of variation
    data       BYTEA NOT NULL
)
;
CREATE VIEW v_profile_summary AS
SELECT profile_id, runs, unstable, cv_runs, cv2_sum FROM profile_vectors
UNION ALL
SELECT p.profile_id, count(*) AS runs, sum(CASE WHEN r.unstable THEN 1 ELSE 0 END) AS unstable,
       count(r.cv) AS cv_runs, sum(r.cv * r.cv) AS cv2_sum
FROM profiles p
JOIN profile_runs r ON r.profile_id = p.profile_id
WHERE NOT EXISTS (SELECT 1 FROM profile_vectors v WHERE v.profile_id = p.profile_id)
GROUP BY p.profile_id
;
