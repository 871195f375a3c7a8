"""The stream probe's valgrind tool (microbench/streamtool.c), built on first use against the
installed valgrind.

Lackey prints a line per access that a reader parses back; a tool of our own does the same stride
bookkeeping (microbench/streamprobe.h) inside valgrind and prints only the summary, tens of times
faster. Valgrind tools are static executables linked like valgrind's own (Makefile.tool.am): no C
library, the core and VEX archives, the text at valgrind's load address. The launcher finds a tool
by name in the directory VALGRIND_LIB names, which must also hold the core's preload library and
suppressions: the build directory gets symlinks to the installed ones. Debian's ``valgrind``
package ships the headers and archives this needs (``valgrind-devel`` elsewhere); without them
`build` raises a one-line UserError and the probe falls back to lackey.
"""

import platform
import shutil
from dataclasses import dataclass
from pathlib import Path

from registry.errors import UserError

TOOL = "nrstreams"
LOAD_ADDRESS = "0x58000000"          # valgrind's valt_load_address on 64-bit Linux
ARCHES = {"x86_64": "amd64", "aarch64": "arm64"}
_LIB_DIRS = ("libexec/valgrind", "lib/valgrind", "lib64/valgrind", "lib/*/valgrind")


@dataclass(frozen=True)
class Valgrind:
    """Where the installed valgrind keeps what a tool build needs."""

    arch: str           # valgrind's name: amd64, arm64
    include: Path       # pub_tool_*.h
    archives: Path      # libcoregrind-ARCH-linux.a, libvex-ARCH-linux.a
    libexec: Path       # the tools and vgpreload_core-ARCH-linux.so

    @property
    def platform(self) -> str:
        return f"{self.arch}-linux"


def _find(prefix: Path, name: str) -> Path | None:
    for pattern in _LIB_DIRS:
        for d in sorted(prefix.glob(pattern)):
            if (d / name).exists():
                return d
    return None


def locate() -> Valgrind:
    """The installed valgrind's headers, archives and tool directory (UserError when one is missing)."""
    arch = ARCHES.get(platform.machine())
    launcher = shutil.which("valgrind")
    if platform.system() != "Linux" or arch is None:
        raise UserError(f"the stream tool is built for Linux on {', '.join(ARCHES)} only, not "
                        f"{platform.system()} {platform.machine()}")
    if launcher is None:
        raise UserError("the stream tool needs valgrind (e.g. apt-get install valgrind)")
    prefix = Path(launcher).resolve().parent.parent
    include = prefix / "include" / "valgrind"
    archives = _find(prefix, f"libcoregrind-{arch}-linux.a")
    libexec = _find(prefix, f"vgpreload_core-{arch}-linux.so")
    if not (include / "pub_tool_basics.h").exists() or archives is None or libexec is None:
        raise UserError(f"valgrind's tool headers or libraries are not installed under {prefix} (Debian: the "
                        "valgrind package; other systems: valgrind-devel)")
    return Valgrind(arch, include, archives, libexec)


def _flags(vg: Valgrind) -> list[str]:
    plat = f"{vg.arch}_linux"
    return ["-fno-stack-protector", "-fno-builtin", "-fno-strict-aliasing", "-fno-pie", f"-I{vg.include}",
            f"-DVGA_{vg.arch}=1", "-DVGO_linux=1", f"-DVGP_{plat}=1", f"-DVGPV_{plat}_vanilla=1",
            "-static", "-nodefaultlibs", "-nostartfiles", "-no-pie", "-u", "_start", "-Wl,--build-id=none",
            f"-Wl,-Ttext-segment={LOAD_ADDRESS}"]


def _link_installed(vg: Valgrind, directory: Path) -> None:
    """The installed tool directory's files (preload libraries, suppressions) next to our tool."""
    for entry in vg.libexec.iterdir():
        try:
            (directory / entry.name).symlink_to(entry)
        except FileExistsError:
            pass


def build() -> Path:
    """The directory to give valgrind as VALGRIND_LIB, with our tool in it (built once per node and
    valgrind: the archives are part of the cache key). UserError when it cannot be built."""
    from registry.microbench.build import compile_c, source

    vg = locate()
    archives = [vg.archives / f"libcoregrind-{vg.platform}.a", vg.archives / f"libvex-{vg.platform}.a"]
    support = vg.archives / f"libgcc-sup-{vg.platform}.a"
    libs = [*map(str, archives), *([str(support)] if support.exists() else []), "-lgcc"]
    tool = compile_c([source("streamtool.c")], f"{TOOL}-{vg.platform}", openmp=False, extra_flags=_flags(vg),
                     libs=libs, depends=[source("streamprobe.h"), *archives])
    _link_installed(vg, tool.parent)
    return tool.parent

