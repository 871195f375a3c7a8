"""The part of an imported suite (Spare Cores: docs/sparecores-trace.md) that runs on this machine.

An imported node type speaks only its own suite: stress-ng stressors, `openssl speed`, membench's
curves. To project a program traced here onto it, this machine must speak that suite too, under the
same config keys (schema/migrations/0014_imported_suites.sql and the importer's contract): the same
stress-ng stressors and openssl algorithms, run here from the Debian packages, and membench's
operations and sizes by our own kernels. Each config is measured with the signature `nodereg match`
compares phases with (the trace's /proc sampler; counters where perf counts).
"""
