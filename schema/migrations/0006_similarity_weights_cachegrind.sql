-- Similarity weights, version 3: cachegrind's absolute counts do not compare runs.
-- `nodereg profile --cachegrind` now measures the cachegrind source for microbenchmark configs
-- (registry/profile/cachegrind_pass.py), as `nodereg trace --cachegrind` does for phases. A
-- config's counts cover two repetitions of its kernel, a phase's its whole duration, so the counts
-- (instructions, data reads and writes) say how long something ran, not what kind of work it was;
-- the rates (accesses per instruction, D1 and LL miss rates, LL misses per 1000 instructions) do.
INSERT INTO similarity_weights (version, pattern, weight, note)
SELECT 3, pattern, weight, note FROM similarity_weights WHERE version = 2;
;
INSERT INTO similarity_weights (version, pattern, weight, note) VALUES
    (3, 'cachegrind.instructions', 0.0, 'a count: grows with the run length'),
    (3, 'cachegrind.data_reads',   0.0, 'a count: grows with the run length'),
    (3, 'cachegrind.data_writes',  0.0, 'a count: grows with the run length');
