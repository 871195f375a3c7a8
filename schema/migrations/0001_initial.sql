-- nodereg schema, version 1.
-- Portable SQL: runs unchanged on DuckDB and PostgreSQL (no engine-only types or syntax).
-- References between tables are logical (marked `-- -> table.column`), not declared FOREIGN KEYs:
-- DuckDB cannot delete a parent row in the same transaction as its children when a foreign key is
-- declared, and removals must be one transaction. The code deletes children first; `nodereg doctor`
-- checks for orphans. Surrogate integer keys come from sequences; `uid` columns (UUID text) identify facts across
-- registries so that bundles import idempotently. Statements are separated by lines holding only ';'.

CREATE SEQUENCE nodes_id_seq;
;
CREATE TABLE nodes (
    node_id          BIGINT PRIMARY KEY DEFAULT nextval('nodes_id_seq'),
    name             VARCHAR NOT NULL UNIQUE,
    host             VARCHAR,            -- host the node was measured on (NULL for imported nodes)
    cpu_list         VARCHAR,            -- CPU restriction, e.g. '0' or '0-3'; NULL = the whole host
    n_cpus           INTEGER,            -- logical CPUs the node has (after restriction)
    cpu_model        VARCHAR,
    sockets          INTEGER,
    cores            INTEGER,            -- physical cores (after restriction)
    threads_per_core INTEGER,
    numa_nodes       INTEGER,
    memory_bytes     BIGINT,
    max_mhz          DOUBLE PRECISION,
    kernel           VARCHAR,
    compiler         VARCHAR,
    inventory_json   TEXT,               -- the full inventory document (see `nodereg inventory --json`)
    source           VARCHAR NOT NULL,   -- profile | import | runs | lumos | bundle
    created_at       TIMESTAMP NOT NULL
);
;
CREATE TABLE node_caches (
    node_id     BIGINT NOT NULL,  -- -> nodes.node_id
    level       INTEGER NOT NULL,
    cache_type  VARCHAR NOT NULL,        -- Data | Instruction | Unified
    size_bytes  BIGINT NOT NULL,
    line_bytes  INTEGER,
    shared_by   INTEGER,                 -- logical CPUs sharing one instance
    instances   INTEGER,                 -- instances within the node
    PRIMARY KEY (node_id, level, cache_type)
);
;
CREATE SEQUENCE microbenchmarks_id_seq;
;
CREATE TABLE microbenchmarks (
    ub_id        BIGINT PRIMARY KEY DEFAULT nextval('microbenchmarks_id_seq'),
    name         VARCHAR NOT NULL UNIQUE,   -- mbw1c, mbw2hc, triad, chase, peak_fma, ...
    family       VARCHAR NOT NULL,          -- thesis | bandwidth | latency | compute
    n_streams    INTEGER NOT NULL,
    description  VARCHAR
);
;
CREATE SEQUENCE ub_configs_id_seq;
;
CREATE TABLE ub_configs (
    config_id    BIGINT PRIMARY KEY DEFAULT nextval('ub_configs_id_seq'),
    ub_id        BIGINT NOT NULL,  -- -> microbenchmarks.ub_id
    config_key   VARCHAR NOT NULL UNIQUE,   -- canonical text of every parameter: the config's identity
    threads      INTEGER NOT NULL,
    placement    VARCHAR NOT NULL,          -- compact | scatter | none
    ws_bytes     BIGINT,                    -- total working set
    params_json  TEXT
);
;
CREATE TABLE ub_streams (
    config_id     BIGINT NOT NULL,  -- -> ub_configs.config_id
    stream_index  INTEGER NOT NULL,         -- position, used for the thesis's positional pairing
    size_elems    BIGINT NOT NULL,          -- elements in the stream's region (the thesis's "size KB" = elems / 1024)
    stride_bytes  BIGINT NOT NULL,
    dtype         VARCHAR NOT NULL,         -- f64 | f32 | i64 ...
    elem_bytes    INTEGER NOT NULL,
    access        VARCHAR NOT NULL,         -- C (shared by all threads) | P (private per thread)
    pattern       VARCHAR NOT NULL,         -- seq | random
    PRIMARY KEY (config_id, stream_index)
);
;
CREATE SEQUENCE profiles_id_seq;
;
CREATE TABLE profiles (
    profile_id    BIGINT PRIMARY KEY DEFAULT nextval('profiles_id_seq'),
    uid           VARCHAR NOT NULL UNIQUE,
    node_id       BIGINT NOT NULL,  -- -> nodes.node_id
    mode          VARCHAR NOT NULL,         -- quick | default | full | custom | import
    started_at    TIMESTAMP NOT NULL,
    finished_at   TIMESTAMP,
    duration_s    DOUBLE PRECISION,
    tool_version  VARCHAR,
    compiler      VARCHAR,
    cflags        VARCHAR,
    host          VARCHAR,
    cpu_list      VARCHAR,
    status        VARCHAR NOT NULL          -- complete (profiles are written in one transaction)
);
;
CREATE SEQUENCE profile_runs_id_seq;
;
CREATE TABLE profile_runs (
    run_id          BIGINT PRIMARY KEY DEFAULT nextval('profile_runs_id_seq'),
    profile_id      BIGINT NOT NULL,  -- -> profiles.profile_id
    config_id       BIGINT NOT NULL,  -- -> ub_configs.config_id
    iterations      BIGINT,                 -- loop iterations of the slowest thread per repetition
    reps            INTEGER NOT NULL,
    median_s        DOUBLE PRECISION NOT NULL,
    min_s           DOUBLE PRECISION,
    cv              DOUBLE PRECISION,       -- coefficient of variation over repetitions
    tpi_us          DOUBLE PRECISION,       -- median time per iteration of the slowest thread, microseconds
    bytes_per_rep   DOUBLE PRECISION,
    flops_per_rep   DOUBLE PRECISION,
    bandwidth_gbs   DOUBLE PRECISION,       -- from the median time
    gflops          DOUBLE PRECISION,
    latency_ns      DOUBLE PRECISION,
    checksum        DOUBLE PRECISION,
    unstable        BOOLEAN NOT NULL
);
;
CREATE TABLE profile_reps (
    run_id   BIGINT NOT NULL,  -- -> profile_runs.run_id
    rep      INTEGER NOT NULL,
    time_s   DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (run_id, rep)
);
;
CREATE SEQUENCE apps_id_seq;
;
CREATE TABLE apps (
    app_id       BIGINT PRIMARY KEY DEFAULT nextval('apps_id_seq'),
    name         VARCHAR NOT NULL UNIQUE,
    description  VARCHAR,
    created_at   TIMESTAMP NOT NULL
);
;
CREATE SEQUENCE traces_id_seq;
;
CREATE TABLE traces (
    trace_id      BIGINT PRIMARY KEY DEFAULT nextval('traces_id_seq'),
    uid           VARCHAR NOT NULL UNIQUE,
    app_id        BIGINT NOT NULL,  -- -> apps.app_id
    node_id       BIGINT NOT NULL,  -- -> nodes.node_id
    command_json  TEXT,                     -- argv as a JSON list
    exit_status   INTEGER,
    status        VARCHAR NOT NULL,         -- ok | failed | timeout | interrupted
    wall_s        DOUBLE PRECISION,
    threads       INTEGER,                  -- threads the application uses (NULL: all of the node's CPUs)
    interval_s    DOUBLE PRECISION,
    source        VARCHAR NOT NULL,         -- trace | lumos | bundle
    started_at    TIMESTAMP NOT NULL,
    meta_json     TEXT
);
;
CREATE TABLE trace_samples (
    trace_id  BIGINT NOT NULL,  -- -> traces.trace_id
    t_s       DOUBLE PRECISION NOT NULL,    -- seconds since the command started
    metric    VARCHAR NOT NULL,
    value     DOUBLE PRECISION,
    PRIMARY KEY (trace_id, t_s, metric)
);
;
CREATE SEQUENCE phases_id_seq;
;
CREATE TABLE phases (
    phase_id     BIGINT PRIMARY KEY DEFAULT nextval('phases_id_seq'),
    trace_id     BIGINT NOT NULL,  -- -> traces.trace_id
    idx          INTEGER NOT NULL,
    name         VARCHAR,
    method       VARCHAR NOT NULL,          -- auto | marker | omp | whole | import
    start_s      DOUBLE PRECISION NOT NULL,
    end_s        DOUBLE PRECISION NOT NULL,
    weight       DOUBLE PRECISION NOT NULL, -- share of the trace's wall time
    time_s       DOUBLE PRECISION,          -- phase time (slowest thread for OpenMP regions)
    iterations   DOUBLE PRECISION,          -- loop iterations of the slowest thread, when known
    calls        BIGINT,
    UNIQUE (trace_id, idx)
);
;
CREATE TABLE phase_streams (
    phase_id      BIGINT NOT NULL,  -- -> phases.phase_id
    stream_index  INTEGER NOT NULL,
    size_elems    BIGINT NOT NULL,
    stride_bytes  BIGINT NOT NULL,
    dtype         VARCHAR NOT NULL,
    elem_bytes    INTEGER NOT NULL,
    access        VARCHAR NOT NULL,
    pattern       VARCHAR NOT NULL,
    PRIMARY KEY (phase_id, stream_index)
);
;
-- Signatures in long form. owner_kind says which table owner_id points into:
--   'phase' -> phases.phase_id, 'profile_run' -> profile_runs.run_id (a uB config measured on a node).
CREATE TABLE signatures (
    owner_kind  VARCHAR NOT NULL,
    owner_id    BIGINT NOT NULL,
    source      VARCHAR NOT NULL,           -- proc | counters | cachegrind | streams | sar | probe
    metric      VARCHAR NOT NULL,
    value       DOUBLE PRECISION,
    PRIMARY KEY (owner_kind, owner_id, source, metric)
);
;
CREATE SEQUENCE runs_id_seq;
;
CREATE TABLE runs (
    run_id      BIGINT PRIMARY KEY DEFAULT nextval('runs_id_seq'),
    uid         VARCHAR NOT NULL UNIQUE,
    app_id      BIGINT NOT NULL,  -- -> apps.app_id
    node_id     BIGINT NOT NULL,  -- -> nodes.node_id
    threads     INTEGER,
    time_s      DOUBLE PRECISION NOT NULL,
    source      VARCHAR NOT NULL,           -- cli | csv | lumos | demo | bundle
    created_at  TIMESTAMP NOT NULL
);
;
CREATE SEQUENCE models_id_seq;
;
CREATE TABLE models (
    model_id     BIGINT PRIMARY KEY DEFAULT nextval('models_id_seq'),
    uid          VARCHAR NOT NULL UNIQUE,
    name         VARCHAR NOT NULL,
    version      VARCHAR NOT NULL,
    scope        VARCHAR,                   -- what the fit is about, e.g. 'app=lu node=n1'
    params_json  TEXT NOT NULL,
    fitted_at    TIMESTAMP NOT NULL
);
;
CREATE SEQUENCE predictions_id_seq;
;
CREATE TABLE predictions (
    prediction_id     BIGINT PRIMARY KEY DEFAULT nextval('predictions_id_seq'),
    uid               VARCHAR NOT NULL UNIQUE,
    trace_id          BIGINT,  -- -> traces.trace_id
    app_id            BIGINT NOT NULL,  -- -> apps.app_id
    node_id           BIGINT NOT NULL,  -- -> nodes.node_id
    model_name        VARCHAR NOT NULL,
    model_version     VARCHAR,
    threads           INTEGER,
    predicted_s       DOUBLE PRECISION NOT NULL,
    low_s             DOUBLE PRECISION,
    high_s            DOUBLE PRECISION,
    node_rank         INTEGER,
    coverage          DOUBLE PRECISION,
    explanation_json  TEXT,
    created_at        TIMESTAMP NOT NULL
);
;
-- Thresholds of the thesis's similarity index (Table 3.21) as data, versioned.
-- A feature's score is that of the first zone (lowest max_pct) whose max_pct >= d%;
-- d% above discard_pct discards the candidate. Categorical features (dtype, access) use
-- max_pct = 0 for "equal" and score 0 otherwise.
CREATE TABLE corredor_zones (
    version   INTEGER NOT NULL,
    feature   VARCHAR NOT NULL,             -- size | stride | dtype | access | tpi
    max_pct   DOUBLE PRECISION NOT NULL,
    score     DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (version, feature, max_pct)
);
;
CREATE TABLE corredor_discards (
    version      INTEGER NOT NULL,
    feature      VARCHAR NOT NULL,
    discard_pct  DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (version, feature)
);
;
INSERT INTO corredor_zones (version, feature, max_pct, score) VALUES
    (1, 'size', 2, 25), (1, 'size', 5, 15), (1, 'size', 10, 10), (1, 'size', 20, 5), (1, 'size', 80, 0),
    (1, 'stride', 5, 25), (1, 'stride', 10, 10), (1, 'stride', 80, 0),
    (1, 'dtype', 0, 25),
    (1, 'access', 0, 25),
    (1, 'tpi', 2, 25), (1, 'tpi', 5, 15), (1, 'tpi', 10, 10), (1, 'tpi', 20, 5), (1, 'tpi', 80, 0);
;
INSERT INTO corredor_discards (version, feature, discard_pct) VALUES
    (1, 'size', 80), (1, 'stride', 80), (1, 'tpi', 80);
;
CREATE INDEX profiles_node_idx ON profiles (node_id);
;
CREATE INDEX profile_runs_profile_idx ON profile_runs (profile_id);
;
CREATE INDEX traces_node_idx ON traces (node_id);
;
CREATE INDEX runs_app_node_idx ON runs (app_id, node_id);
