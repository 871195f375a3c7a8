-- nodereg schema, version 14: node types imported from other suites (Spare Cores), and what a node
-- offers to a binary (architecture, ISA flags).
-- A suite is a family of measurements taken by one tool set: 'nodereg' (our own kernels, the
-- default) or an imported one ('sparecores'). References are only ever compared within one suite:
-- an imported micro-benchmark's figure is never set against one of our kernels.
-- An imported config keeps the tool's own figure (profile_runs.value, in ub_configs.unit, with
-- ub_configs.higher_is_better); profile_runs.median_s stays a time-like cost, lower is faster
-- (1 / value for a rate, the value itself for a latency), so every existing reader of median_s
-- keeps its meaning.
-- Portable SQL: DuckDB and PostgreSQL.
ALTER TABLE microbenchmarks ADD COLUMN suite VARCHAR          -- NULL or 'nodereg': our kernels; else the imported suite
;
ALTER TABLE ub_configs ADD COLUMN unit VARCHAR                -- unit of profile_runs.value (imported suites)
;
ALTER TABLE ub_configs ADD COLUMN higher_is_better BOOLEAN    -- NULL for our kernels (median_s is a time)
;
ALTER TABLE profile_runs ADD COLUMN value DOUBLE PRECISION    -- the tool's own figure, in ub_configs.unit
;
ALTER TABLE profiles ADD COLUMN suite VARCHAR                  -- NULL: our kernels; else the suite every config in it belongs to
;
ALTER TABLE profiles ADD COLUMN provenance_json TEXT          -- imported: dataset, commit, run dates, tool versions
;
ALTER TABLE nodes ADD COLUMN vendor VARCHAR                   -- cloud vendor of an imported type (aws, azure, gcp)
;
ALTER TABLE nodes ADD COLUMN architecture VARCHAR             -- x86_64 | aarch64 | ... (uname -m spelling)
;
ALTER TABLE nodes ADD COLUMN cpu_vendor VARCHAR               -- AMD | Intel | ARM | AWS | Ampere | Microsoft ...
;
ALTER TABLE nodes ADD COLUMN cpu_family VARCHAR               -- microarchitecture: 'Zen 4', 'Sapphire Rapids', 'Graviton3' ...
;
ALTER TABLE nodes ADD COLUMN isa_flags VARCHAR                -- space-separated CPU flags the node offers (lscpu / cpuinfo)
