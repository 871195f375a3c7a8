-- Feature weights of the `similarity` projection model, as data (versioned like corredor_zones).
-- A feature 'source.metric' takes the weight of its exact pattern, else of 'source.*', else of '*'.
-- The model multiplies this prior by a relevance it learns from the references when it is fitted
-- (registry/models/similarity.py); a weight of 0 removes a feature or a whole source.
-- Portable SQL: DuckDB and PostgreSQL.
CREATE TABLE similarity_weights (
    version  INTEGER NOT NULL,
    pattern  VARCHAR NOT NULL,            -- 'source.metric', 'source.*' or '*'
    weight   DOUBLE PRECISION NOT NULL,
    note     VARCHAR,
    PRIMARY KEY (version, pattern)
);
;
INSERT INTO similarity_weights (version, pattern, weight, note) VALUES
    (1, '*',            1.0, 'any feature without a more specific entry'),
    (1, 'proc.*',       1.0, 'per-process CPU, memory, I/O from /proc (nodereg trace)'),
    (1, 'counters.*',   1.0, 'hardware performance counters'),
    (1, 'cachegrind.*', 1.0, 'simulated instruction and cache-miss rates'),
    (1, 'streams.*',    1.0, 'stream descriptors'),
    (1, 'sar.*',        1.0, 'summaries of imported sar traces'),
    (1, 'meta.*',       1.0, 'what is known of an app when traced (framework, data size)');
