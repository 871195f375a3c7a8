-- Similarity weights, version 2: which `proc` metrics place a phase among microbenchmark configs.
-- A config's proc signature is measured on the driver process (registry/profile/signatures.py)
-- with all of a node's references at one thread count. Of what /proc shows, only the working set
-- over the last-level cache tells kernels apart (L1-, L2-, L3- or memory-resident); CPU use and
-- active threads are the same for every config at that thread count (the thread count itself
-- is matched separately), and faults, context switches, resident memory and I/O come from the
-- driver's buffer management or scheduler noise, not from the kernel. Those weigh 0.
INSERT INTO similarity_weights (version, pattern, weight, note)
SELECT 2, pattern, weight, note FROM similarity_weights WHERE version = 1 AND pattern <> 'proc.*';
;
INSERT INTO similarity_weights (version, pattern, weight, note) VALUES
    (2, 'proc.*',       0.0, 'proc metrics other than the working set do not tell configs apart'),
    (2, 'proc.wss_llc', 1.0, 'working set over the last-level cache: cache- or memory-resident');
