"""Predicting an application's time on every node type of an imported suite (Spare Cores) from its
measured time on 1-3 of them, and the honest cross-architecture evaluation of that (docs/crossarch.md).

* ``data``: the suite's micro-benchmark costs, the apps' measured times and the nodes' CPU families,
  read from the registry (or built by a caller, as the tests do).
* ``references``: what an app may be predicted from (the micro-benchmark configs and the other apps
  outside its family) as a ``ReferenceSet`` seen from the calibration nodes, so that every projection
  model plugin (registry/models/) serves here unchanged.
* ``project``: one app, its calibration runs, every other node: predictions, intervals, warnings.
* ``evaluate``: K calibration nodes of different CPU families per app and seed, every node of another
  family predicted; error, Spearman, top-1, regret, coverage by app group and across architectures.
"""
