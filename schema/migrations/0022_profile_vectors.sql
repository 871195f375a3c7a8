-- nodereg schema, version 22: each profile's runs packed into one row, as `nodereg match` reads them.
-- A match reads, per run of every node's latest profile, its config, thread count, cache level and
-- throughput; computed from profile_runs on every match, a 10,000-node x 300-config registry is three
-- million rows. The writer of a profile packs them once (registry/profile/vectors.py: the same SQL, an
-- array of (config_id int64, threads int32, level int16, throughput float64) little-endian records in
-- run order); profiles stored before this version, or without a packed row, are read as before.
-- Derived data: bundles leave it out and the importer packs again. Portable SQL: DuckDB and PostgreSQL
-- (BYTEA is DuckDB's BLOB).
CREATE TABLE profile_vectors (
    profile_id BIGINT PRIMARY KEY,
    runs       INTEGER NOT NULL,
    data       BYTEA NOT NULL
)
;
