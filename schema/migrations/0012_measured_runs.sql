-- nodereg schema, version 12: runs measured by `nodereg run` say how.
-- `nodereg run NODE -- CMD` times a command on a node of this host several times; each repetition is a
-- row of runs, as before, so every reader of runs (scaling, evaluate, match, v_predictions) counts them
-- unchanged. The new columns say where a row came from: the command line, its exit status, and the
-- batch (the repetitions of one `nodereg run`). Only successful repetitions are stored: a failed run is
-- not a timing (registry/cli/run.py). The columns are NULL for runs added by hand or imported.
-- Portable SQL: DuckDB and PostgreSQL.
ALTER TABLE runs ADD COLUMN command_json TEXT     -- the command as a JSON list of arguments (never a shell line)
;
ALTER TABLE runs ADD COLUMN exit_status INTEGER   -- the command's exit status
;
ALTER TABLE runs ADD COLUMN batch_uid VARCHAR     -- shared by the repetitions of one `nodereg run`
;
-- One row per `nodereg run`: its repetitions, their median and spread.
CREATE VIEW v_run_batches AS
SELECT r.batch_uid, a.name AS app, n.name AS node, r.threads, r.command_json,
       count(*)                                                  AS repetitions,
       percentile_cont(0.5) WITHIN GROUP (ORDER BY r.time_s)     AS median_s,
       min(r.time_s)                                             AS min_s,
       max(r.time_s)                                             AS max_s,
       min(r.created_at)                                         AS created_at
FROM runs r
JOIN apps a  ON a.app_id = r.app_id
JOIN nodes n ON n.node_id = r.node_id
WHERE r.batch_uid IS NOT NULL
GROUP BY r.batch_uid, a.name, n.name, r.threads, r.command_json
