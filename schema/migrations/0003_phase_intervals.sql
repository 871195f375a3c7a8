-- nodereg schema, version 3: the occurrences of a phase.
-- A marker phase named once per loop iteration, or an OpenMP phase (one outlined function called
-- many times), covers several disjoint stretches of the run: [[start_s, end_s], ...] as JSON.
-- start_s/end_s stay the first start and the last end; NULL means the single interval [start_s, end_s].
ALTER TABLE phases ADD COLUMN intervals_json TEXT
