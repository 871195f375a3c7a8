"""Bundles: a registry's data as Parquet tables plus a manifest, to move nodes between registries.

Surrogate keys (node_id, run_id, ...) are local to a registry, so import re-keys every row:
rows with a natural identity (a node's or app's name, a config's key, a uB's name) join the
row already there; facts produced somewhere (profiles, traces, runs, models, predictions) carry
a `uid` and are skipped when present. Children come along only with a parent that is new. So
importing a bundle twice adds nothing, and the whole import is one transaction.
"""

import json
import re
import shutil
import tempfile
import zipfile
from contextlib import contextmanager
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import sqlalchemy as sa

from registry import __version__
from registry.db import db_error, is_driver_error, utcnow
from registry.db.migrate import current_version
from registry.db.names import check_name
from registry.db.relations import OWNER_TABLES, SPECS, Spec
from registry.db.write import allocate_ids, insert_if_absent, insert_rows
from registry.errors import StorageError, UserError
from registry.io.limits import Limits
from registry.profile.vectors import store_vectors

FORMAT = "nodereg-bundle"
FORMAT_VERSION = 1
# tables whose names people give, checked as they enter (registry/db/names.py), and their noun
_NAMED = {"nodes": "node", "apps": "app"}
# columns that say whether two same-named nodes are the same hardware configuration
NODE_CONTENT = ("cpu_model", "n_cpus", "cores", "sockets", "threads_per_core", "memory_bytes", "cpu_list")


def _read_table(conn: sa.Connection, table: str) -> pd.DataFrame:
    return pd.read_sql(sa.text(f"SELECT * FROM {table}"), conn, dtype_backend="numpy_nullable")


@contextmanager
def snapshot(conn: sa.Connection):
    """One consistent view of every table for the block, whatever commits meanwhile: PostgreSQL's
    REPEATABLE READ READ ONLY transaction (under READ COMMITTED each SELECT saw the commits made
    since the one before, so a bundle could hold rows whose parents it lacks); on DuckDB, one
    transaction (its MVCC snapshot)."""
    if conn.in_transaction():
        conn.rollback()   # nothing of the caller's is pending: its reads only
    postgres = conn.dialect.name == "postgresql"
    if postgres:
        readonly = conn.get_execution_options().get("postgresql_readonly", False)
        conn.execution_options(isolation_level="REPEATABLE READ", postgresql_readonly=True)
    try:
        with conn.begin():
            yield conn
    finally:
        if postgres:   # as it was: the caller may go on (a migration after its backup)
            conn.execution_options(isolation_level=conn.default_isolation_level, postgresql_readonly=readonly)


def export_bundle(conn: sa.Connection, path: Path, tables: list[str] | None = None,
                  replace: bool = False) -> dict:
    """Write every data table (or `tables`) to `path` (a directory, or a .zip file), all read in one
    snapshot; returns the manifest. An existing bundle there is replaced only with `replace`, and only
    once the new one is written (anything else at `path` is never replaced)."""
    path = Path(path)
    if path.exists() and (path.is_file() or any(path.iterdir())):
        if not replace:
            raise UserError(f"{path} already exists: choose a new path for the bundle, or pass --force to replace it")
        if not _is_bundle(path):
            raise UserError(f"{path} exists and is not a nodereg bundle: not replacing it")
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp)
        with snapshot(conn):
            manifest = {"format": FORMAT, "format_version": FORMAT_VERSION, "schema_version": current_version(conn),
                        "tool_version": __version__, "created_at": utcnow().isoformat(), "tables": {}}
            for table in tables or [spec.table for spec in SPECS if not spec.derived]:
                frame = _read_table(conn, table)
                pq.write_table(pa.Table.from_pandas(frame, preserve_index=False), out / f"{table}.parquet")
                manifest["tables"][table] = len(frame)
        (out / "manifest.json").write_text(json.dumps(manifest, indent=2))
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            staged = path.with_name(f".{path.name}.partial")   # beside it: the rename below stays on one disk
            _remove(staged)
            if path.suffix == ".zip":
                with zipfile.ZipFile(staged, "w", zipfile.ZIP_DEFLATED) as zf:
                    for f in sorted(out.iterdir()):
                        zf.write(f, f.name)
            else:
                shutil.copytree(out, staged)
            _remove(path)
            staged.rename(path)
        except OSError as exc:
            raise UserError(f"cannot write bundle {path}: {exc.strerror or exc}") from None
    return manifest


_MEMBER = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}")   # a bundle is flat: no folders, no '..'


def _human(n: int) -> str:
    return f"{n / 2**20:.1f} MiB" if n < 2**30 else f"{n / 2**30:.1f} GiB"


def _check_sizes(path: Path, sizes: dict[str, int], limits: Limits) -> None:
    if len(sizes) > limits.max_members:
        raise UserError(f"bundle {path} holds {len(sizes)} files, more than the limit of {limits.max_members} "
                        "(--max-members): refused, nothing imported")
    bad = next((name for name in sizes if not _MEMBER.fullmatch(name)), None)
    if bad is not None:
        raise UserError(f"bundle {path} holds a member named {bad!r}: a bundle's files sit at its top level "
                        "(no folders, no '..', no absolute paths): refused, nothing imported")
    total = sum(sizes.values())
    if total > limits.max_bytes:
        raise UserError(f"bundle {path} unpacks to {_human(total)}, more than the limit of "
                        f"{_human(limits.max_bytes)} (--max-size): refused, nothing imported")


def _unpack(zf: zipfile.ZipFile, into: Path, path: Path, limits: Limits) -> None:
    """Extract the checked members, counting what comes out: a member that inflates past its
    declared size stops the import as the limit would have."""
    left = limits.max_bytes
    for info in zf.infolist():
        with zf.open(info) as src, open(into / info.filename, "wb") as dst:
            while chunk := src.read(1 << 20):
                left -= len(chunk)
                if left < 0:
                    raise UserError(f"bundle {path} unpacks to more than {_human(limits.max_bytes)} (--max-size): "
                                    "refused, nothing imported")
                dst.write(chunk)


def _is_bundle(path: Path) -> bool:
    """Whether `path` holds a bundle's manifest (what --force may replace)."""
    try:
        if path.is_dir():
            return json.loads((path / "manifest.json").read_text()).get("format") == FORMAT
        with zipfile.ZipFile(path) as zf:
            return json.loads(zf.read("manifest.json")).get("format") == FORMAT
    except (OSError, ValueError, KeyError, zipfile.BadZipFile):
        return False


def _remove(path: Path) -> None:
    if path.is_dir():
        shutil.rmtree(path)
    elif path.exists():
        path.unlink()


@contextmanager
def _opened(path: Path, limits: Limits):
    """The bundle's directory (a zip is unpacked to a temporary one), within `limits`."""
    path = Path(path)
    if path.is_dir():
        files = [f for f in path.iterdir()]
        _check_sizes(path, {f.name: (f.stat().st_size if f.is_file() else 0) for f in files}, limits)
        yield path
        return
    if not path.exists():
        raise UserError(f"bundle {path} does not exist")
    try:
        with tempfile.TemporaryDirectory() as tmp, zipfile.ZipFile(path) as zf:
            members = zf.infolist()
            if any(m.is_dir() for m in members):
                raise UserError(f"bundle {path} holds a folder: a bundle's files sit at its top level: "
                                "refused, nothing imported")
            _check_sizes(path, {m.filename: m.file_size for m in members}, limits)
            _unpack(zf, Path(tmp), path, limits)
            yield Path(tmp)
    except (zipfile.BadZipFile, OSError) as exc:
        raise UserError(f"bundle {path} is not a readable directory or zip file ({exc})") from None


def _manifest(root: Path, path: Path, registry_version: int) -> dict:
    try:
        manifest = json.loads((root / "manifest.json").read_text())
    except (OSError, ValueError):
        raise UserError(f"bundle {path} has no readable manifest.json") from None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        found = manifest.get("format") if isinstance(manifest, dict) else type(manifest).__name__
        raise UserError(f"{path} is not a nodereg bundle (manifest format {found!r})")
    versions = (manifest.get("format_version"), manifest.get("schema_version"))
    if not all(isinstance(v, int) and not isinstance(v, bool) and v >= 1 for v in versions):
        raise UserError(f"bundle {path}: manifest has no valid format_version/schema_version")
    if versions[0] > FORMAT_VERSION or versions[1] > registry_version:
        raise UserError(f"bundle {path} was written by a newer nodereg (schema {manifest.get('schema_version')}, "
                        f"this registry has {registry_version}): upgrade nodereg")
    return manifest


# integer and boolean columns with NULLs must stay integer/boolean (not become float/object)
_NULLABLE = {pa.int32(): pd.Int64Dtype(), pa.int64(): pd.Int64Dtype(), pa.bool_(): pd.BooleanDtype()}


def _load_frames(root: Path, conn: sa.Connection, path: Path, limits: Limits) -> dict[str, pd.DataFrame]:
    frames = {}
    for spec in SPECS:
        file = root / f"{spec.table}.parquet"
        if spec.derived or not file.exists():   # derived rows are computed again, never taken from a file
            frames[spec.table] = pd.DataFrame()
            continue
        try:
            rows = pq.ParquetFile(file).metadata.num_rows   # the footer only: nothing read yet
            if rows > limits.max_rows:
                raise UserError(f"bundle {path}: table {spec.table} holds {rows:,} rows, more than the limit of "
                                f"{limits.max_rows:,} (--max-rows): refused, nothing imported")
            frame = pq.read_table(file).to_pandas(types_mapper=_NULLABLE.get)
        except (pa.ArrowException, OSError) as exc:
            raise UserError(f"bundle {path}: table {file.name} is unreadable ({' '.join(str(exc).split())[:120]})") from None
        known = set(conn.execute(sa.text(f"SELECT * FROM {spec.table} WHERE 1 = 0")).keys())
        extra = sorted(set(frame.columns) - known)
        if extra:
            raise UserError(f"bundle {path}: table {spec.table} has columns this registry lacks ({', '.join(extra)})")
        frames[spec.table] = frame
    return frames


class _Importer:
    def __init__(self, conn: sa.Connection, frames: dict[str, pd.DataFrame], rename: bool, same_type: bool = False):
        self.conn, self.frames, self.rename, self.same_type = conn, frames, rename, same_type
        self.idmap: dict[str, dict] = {}      # table -> {bundle id: registry id}
        self.new: dict[str, set] = {}         # table -> bundle ids inserted as new rows
        self.added: dict[str, int] = {}
        self.renamed: dict[str, str] = {}

    def run(self) -> dict:
        for spec in SPECS:
            frame = self.frames[spec.table]
            if frame.empty:
                continue
            try:
                self._import_table(spec, frame)
            except UserError:
                raise
            except Exception as exc:  # noqa: BLE001 - sorted below: only damaged content is translated
                if not (is_driver_error(exc) or isinstance(exc, (ValueError, TypeError, KeyError, pa.ArrowException))):
                    raise
                if is_driver_error(exc) and isinstance(db_error(exc), StorageError):
                    raise db_error(exc) from None  # the disk, not the bundle
                # damaged content (NULL where a value is required, text in a number column, ...):
                # the caller's transaction rolls back, so nothing of the bundle is kept
                detail = " ".join(str(getattr(exc, "orig", None) or exc).split())[:160]
                raise UserError(f"bundle table {spec.table} has invalid data: {detail}") from None
        new_profiles = self.new.get("profiles", set())
        store_vectors(self.conn, [self.idmap["profiles"][p] for p in new_profiles])
        return {"added": {t: n for t, n in self.added.items() if n}, "renamed": self.renamed}

    def _import_table(self, spec: Spec, frame: pd.DataFrame) -> None:
        if spec.table == "signatures":
            keep = pd.Series(False, index=frame.index)
            for kind, table in OWNER_TABLES.items():
                keep |= (frame["owner_kind"] == kind) & frame["owner_id"].isin(self.new.get(table, set()))
            frame = frame[keep].copy()
            for kind, table in OWNER_TABLES.items():
                mask = frame["owner_kind"] == kind
                frame.loc[mask, "owner_id"] = frame.loc[mask, "owner_id"].map(self.idmap.get(table, {}))
        elif spec.identity:
            frame = self._match_identity(spec, frame)
        elif spec.parent:
            col, table = spec.parent
            frame = frame[frame[col].isin(self.new.get(table, set()))].copy()
        self._insert(spec, frame)

    def _existing(self, spec: Spec) -> pd.DataFrame:
        cols = ", ".join(dict.fromkeys((spec.pk, *spec.identity, *(NODE_CONTENT if spec.table == "nodes" else ()))))
        return pd.read_sql(sa.text(f"SELECT {cols} FROM {spec.table}"), self.conn, dtype_backend="numpy_nullable")

    def _match_identity(self, spec: Spec, frame: pd.DataFrame) -> pd.DataFrame:
        existing = self._existing(spec)
        by_key = {tuple(r[c] for c in spec.identity): r for _, r in existing.iterrows()}
        mapping = self.idmap.setdefault(spec.table, {})
        fresh = []
        for idx, row in frame.iterrows():
            hit = by_key.get(tuple(row[c] for c in spec.identity))
            if hit is not None and spec.table == "nodes" and not self.same_type and not _same_node(hit, row):
                if not self.rename:
                    raise UserError(f"node {row['name']!r} exists in this registry with different hardware "
                                    "(bundle: {}; here: {}): pass --rename to import it under a new name".format(
                                        _node_text(row), _node_text(hit)))
                new_name = self._free_name(row["name"], set(existing["name"]))
                self.renamed[row["name"]] = new_name
                frame.loc[idx, "name"] = new_name
                hit = None
            if hit is None:
                fresh.append(idx)
            else:
                mapping[row[spec.pk]] = int(hit[spec.pk])
        if spec.table in _NAMED:
            for name in frame.loc[fresh, "name"]:
                check_name(name, _NAMED[spec.table], "bundle")
        return frame.loc[fresh].copy()

    def _free_name(self, name: str, taken: set) -> str:
        taken = taken | set(self.renamed.values())
        n = 2
        while f"{name}-{n}" in taken:
            n += 1
        return f"{name}-{n}"

    def _insert(self, spec: Spec, frame: pd.DataFrame) -> None:
        if frame.empty:
            return
        refs = dict(spec.refs)
        if spec.parent:
            refs[spec.parent[0]] = spec.parent[1]
        for col, table in refs.items():
            mapping = self.idmap.get(table, {})
            mapped = frame[col].map(lambda v, m=mapping: pd.NA if pd.isna(v) else m.get(v, -1))
            if (mapped == -1).any():
                raise UserError(f"bundle is inconsistent: {spec.table}.{col} points to a missing {table} row")
            frame[col] = mapped.astype("Int64")
        if spec.identity and spec.identity != ("uid",):
            self._insert_natural(spec, frame)
            return
        if spec.pk:
            new_ids = allocate_ids(self.conn, spec.sequence, len(frame))
            self.idmap.setdefault(spec.table, {}).update(zip(frame[spec.pk], new_ids))
            self.new[spec.table] = set(frame[spec.pk])
            frame[spec.pk] = new_ids
        self.added[spec.table] = insert_rows(self.conn, spec.table, frame.reset_index(drop=True))


    def _insert_natural(self, spec: Spec, frame: pd.DataFrame) -> None:
        """Rows identified by name go in one by one, tolerating a concurrent writer adding the same name."""
        mapping, new = self.idmap.setdefault(spec.table, {}), self.new.setdefault(spec.table, set())
        for row in frame.to_dict("records"):
            old = row.pop(spec.pk)
            values = {k: (None if pd.isna(v) else v) for k, v in row.items()}
            key = {c: values.pop(c) for c in spec.identity}
            mapping[old], created = insert_if_absent(self.conn, spec.table, key, values, spec.pk)
            if created:
                new.add(old)
                self.added[spec.table] = self.added.get(spec.table, 0) + 1


def _same_node(a, b) -> bool:
    return all((pd.isna(a[c]) and pd.isna(b[c])) or (not pd.isna(a[c]) and not pd.isna(b[c]) and a[c] == b[c])
               for c in NODE_CONTENT)


def _node_text(row) -> str:
    return f"{row['cpu_model']}, {row['n_cpus']} CPUs, cpus={row['cpu_list']}"


def import_bundle(conn: sa.Connection, path: Path, rename: bool = False, same_type: bool = False,
                  limits: Limits = Limits()) -> dict:
    """Import a bundle into the registry behind `conn` (call inside one transaction).

    `same_type`: a same-named node is the same node type whatever its inventory says (the bundles
    of a fleet are hosts of one type, whose memory sizes differ by what firmware keeps; comparing
    hosts is `nodereg health`'s job), as when its hosts profile into the registry directly."""
    with _opened(Path(path), limits) as root:
        manifest = _manifest(root, Path(path), current_version(conn))
        frames = _load_frames(root, conn, Path(path), limits)
    result = _Importer(conn, frames, rename, same_type).run()
    result["manifest"] = manifest
    return result
