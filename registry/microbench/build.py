"""Compile shipped C sources once per node and cache the result per user.

The cache key is a hash of the sources, the compiler's identity (`cc --version`), the flags and
the CPU (model and instruction-set flags, which -march=native compiles for), so a new compiler or
edited kernel rebuilds, and nothing is rebuilt otherwise. The cache sits in the home directory,
which a cluster shares over NFS between node types: a binary built on one CPU must never run on
another that lacks its instructions (SIGILL), or is tuned for it less well. Builds land in a
temporary file first and are renamed into place, so a killed build never leaves a half binary.
"""

import functools
import hashlib
import os
import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from pathlib import Path

import platformdirs

from registry.errors import UserError
from registry.inventory import compiler_version, cpu_identity
from registry.resources import data_dir

BASE_FLAGS = ("-O3", "-std=gnu11", "-Wall")


def compiler() -> str:
    cc = os.environ.get("CC", "cc")
    if not shutil.which(cc):
        raise UserError(f"no C compiler found (looked for {cc!r}; set CC): nodereg builds its "
                        "microbenchmarks on each node, install gcc or clang")
    return cc


def cache_dir() -> Path:
    return Path(os.environ.get("NODEREG_BUILD_CACHE") or platformdirs.user_cache_dir("nodereg")) / "build"


@functools.cache
def _supports(cc: str, flag: str) -> bool:
    """Whether `cc` accepts `flag` (a test compile; once per process and flag)."""
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "t.c"
        src.write_text("int main(void){return 0;}\n")
        res = subprocess.run([cc, flag, str(src), "-o", str(Path(tmp) / "t")], capture_output=True)
        return res.returncode == 0


def native_flags(cc: str) -> tuple[str, ...]:
    """-march=native where the compiler accepts it (not every compiler/arch does)."""
    return ("-march=native",) if _supports(cc, "-march=native") else ()


def valgrind_flags(cc: str) -> tuple[str, ...]:
    """Flags for a build that valgrind can run: valgrind (3.19) does not decode AVX-512, which
    -march=native enables on many x86 nodes, so those builds keep AVX2 at most."""
    return ("-mno-avx512f",) if _supports(cc, "-mno-avx512f") else ()


def source(name: str) -> Path:
    """A file shipped under microbench/."""
    path = data_dir("microbench") / name
    if not path.exists():
        raise FileNotFoundError(path)
    return path


def compile_c(sources: Sequence[Path], output_name: str, *, shared: bool = False, openmp: bool = True,
              extra_flags: Sequence[str] = (), libs: Sequence[str] = ("-lm",),
              depends: Sequence[Path] = (), cc: str | None = None, identity: str = "") -> Path:
    """Build `sources` into an executable (or shared library) and return its cached path.

    `depends` are files the sources include (headers): they are part of the cache key, so
    editing a header rebuilds, but they are not passed to the compiler. `cc`: another compiler
    than the node's C compiler (the MPI wrapper `mpicc`); `identity`: what else the binary
    depends on (the MPI library's version), part of the cache key too.
    """
    cc = cc or compiler()
    flags = [*BASE_FLAGS, *native_flags(cc), *extra_flags]
    if openmp:
        flags.append("-fopenmp")
    if shared:
        flags += ["-shared", "-fPIC"]
    digest = hashlib.sha256()
    for src in [*sources, *depends]:
        digest.update(Path(src).read_bytes())
    digest.update((compiler_version(cc) or cc).encode())
    digest.update(" ".join(flags + list(libs)).encode())
    digest.update(cpu_identity().encode())
    digest.update(identity.encode())
    target = cache_dir() / digest.hexdigest()[:16] / output_name
    if target.exists():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{output_name}.")
    os.close(fd)
    cmd = [cc, *flags, *map(str, sources), "-o", tmp, *libs]
    res = subprocess.run(cmd, capture_output=True, text=True)
    if res.returncode != 0:
        os.unlink(tmp)
        first = next((ln for ln in res.stderr.splitlines() if "error" in ln), res.stderr.strip()[:200])
        raise UserError(f"building {output_name} failed with {cc}: {first}")
    os.chmod(tmp, 0o755)
    os.replace(tmp, target)
    return target


def build_flags_description() -> str:
    """The flags a build on this node uses, for provenance in the registry."""
    cc = compiler()
    return " ".join([*BASE_FLAGS, *native_flags(cc), "-fopenmp"])
