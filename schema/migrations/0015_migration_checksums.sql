-- nodereg schema, version 15: each applied migration is recorded with the checksum of the statements
-- it ran (registry/db/migrate.py), so that a migration file changed after a registry applied it is
-- refused instead of leaving the registry's history unknown. Migrations applied before this one get
-- the checksum of their file when this one is applied.
-- Portable SQL: DuckDB and PostgreSQL.
ALTER TABLE schema_version ADD COLUMN checksum VARCHAR   -- sha256 of the statements; NULL only in passing
;
