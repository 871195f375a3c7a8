"""The PostgreSQL role that `nodereg sql` runs analysts' statements as.

A read-only transaction stops writes to tables, not a superuser's other side effects (COPY TO a
server file, lo_export, pg_terminate_backend, pg_reload_conf). `SET ROLE` alone does not hold
either: inside one statement, `set_config('role', ...)` switches back to any role the session
user may use (tried: a superuser URL got its privileges back and reloaded the server's config).
So the statement runs inside a SECURITY DEFINER function owned by a plain NOLOGIN role:
PostgreSQL refuses to change role or session authorization inside such a function, and the
statement has that role's privileges only (SELECT on the registry's tables and views).

The function's owner *is* the reader: `nodereg sql` finds it through the registry itself, so every
analyst gets the same role with nothing to configure, and no setting can point it elsewhere.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from registry.errors import UserError

if TYPE_CHECKING:
    import sqlalchemy as sa

DEFAULT_ROLE = "nodereg_reader"
FUNCTION = "nodereg_sql"
SET_UP = f"nodereg init --reader {DEFAULT_ROLE}"

_NAME = re.compile(r"[a-z_][a-z0-9_]{0,62}")
# What a role may do beyond reading: any of it would go with the statement into the function.
POWERS = """array_remove(ARRAY[
        CASE WHEN r.rolsuper THEN 'SUPERUSER' END, CASE WHEN r.rolcreaterole THEN 'CREATEROLE' END,
        CASE WHEN r.rolcreatedb THEN 'CREATEDB' END, CASE WHEN r.rolreplication THEN 'REPLICATION' END,
        CASE WHEN r.rolbypassrls THEN 'BYPASSRLS' END], NULL)
    || ARRAY(SELECT 'membership in ' || m.roleid::regrole::text FROM pg_auth_members m WHERE m.member = r.oid)"""
FIND = f"""SELECT r.rolname, {POWERS} FROM pg_proc p JOIN pg_roles r ON r.oid = p.proowner
           WHERE p.oid = to_regprocedure('{FUNCTION}(text)')"""
_BODY = "BEGIN RETURN QUERY EXECUTE query; END"


def setup(conn: sa.Connection, role: str) -> int:
    """Create the reader role (or bring it up to date); returns how many tables and views it may read.

    Idempotent. Needs a superuser: the role must own the function, which PostgreSQL lets only a
    superuser arrange without giving the role CREATE on the schema.
    """
    import sqlalchemy as sa

    if not _NAME.fullmatch(role):
        raise UserError(f"invalid role name {role!r}: use lower-case letters, digits and _ (e.g. {DEFAULT_ROLE})")
    if not conn.execute(sa.text("SELECT rolsuper FROM pg_roles WHERE rolname = current_user")).scalar_one():
        raise UserError("creating the read-only role needs a superuser connection (the role must own a "
                        f"function): run `nodereg --db postgresql://SUPERUSER@HOST/DB init --reader {role}` once")
    powers = conn.execute(sa.text(f"SELECT {POWERS} FROM pg_roles r WHERE r.rolname = :role"), {"role": role}).scalar()
    if powers:
        raise UserError(f"role {role} exists with {', '.join(powers)}: `nodereg sql` must not run as it; "
                        "choose another name")
    quote = conn.dialect.identifier_preparer.quote
    schema_name, owner = conn.execute(sa.text(
        "SELECT current_schema(), (SELECT tableowner FROM pg_tables "
        "WHERE schemaname = current_schema() AND tablename = 'schema_version')")).one()
    who, schema = quote(role), quote(schema_name)
    function = f"{schema}.{FUNCTION}(text)"
    statements = [] if powers is not None else [f"CREATE ROLE {who} NOLOGIN"]
    statements += [
        f"GRANT USAGE ON SCHEMA {schema} TO {who}",
        f"GRANT SELECT ON ALL TABLES IN SCHEMA {schema} TO {who}",  # tables and views
        # tables and views that later migrations add, run by the registry's owner
        f"ALTER DEFAULT PRIVILEGES FOR ROLE {quote(owner)} IN SCHEMA {schema} GRANT SELECT ON TABLES TO {who}",
        f"CREATE OR REPLACE FUNCTION {schema}.{FUNCTION}(query text) RETURNS SETOF record "
        f"LANGUAGE plpgsql SECURITY DEFINER AS $fn$ {_BODY} $fn$",
        f"ALTER FUNCTION {function} OWNER TO {who}",
        f"REVOKE ALL ON FUNCTION {function} FROM PUBLIC",  # the caller must be able to SET ROLE to the reader
    ]
    for stmt in statements:
        conn.execute(sa.text(stmt))
    return conn.execute(sa.text(
        "SELECT count(*) FROM information_schema.role_table_grants "
        "WHERE grantee = :role AND table_schema = current_schema() AND privilege_type = 'SELECT'"),
        {"role": role}).scalar_one()


def missing() -> UserError:
    return UserError("this PostgreSQL registry has no read-only role for `nodereg sql` yet: its admin creates "
                     f"it once with `{SET_UP}` (docs/storage.md)")


def unsafe(role: str, powers: list[str]) -> UserError:
    return UserError(f"`nodereg sql` runs as the role {role}, which has {', '.join(powers)}: refused; its admin "
                     "should take that away, or set up a new reader with `nodereg init --reader NEW_ROLE`")


def not_granted(role: str, user: str) -> UserError:
    return UserError(f"`nodereg sql` runs as the read-only role {role}, which {user} may not use: "
                     f"ask the registry's admin to run GRANT {role} TO {user}")
