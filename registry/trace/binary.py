"""What a traced program needs of a node to run at all: its ELF machine and the ISA extensions its
code uses.

A predicted time for a node that cannot run the binary is not slow, it is wrong (an x86 build on
an aarch64 node, an AVX-512 build on an AVX2-only one). `nodereg trace` records the needs of the
command's executable in the trace's meta (`binary`); `match` leaves out the nodes that do not
offer them (registry.match.portability) unless the app is portable (`--portable`).

The ISA extensions come from two cheap sources, the first that says something winning:
- the x86 ISA level the linker recorded (GNU property note X86_ISA_1_NEEDED, set by
  `-mneeded` or `-march=x86-64-v3`): exact;
- the registers the code names (`objdump -d` of the executable's .text, when objdump is there and
  the code is under MAX_SCAN_BYTES): zmm, mask or upper xmm/ymm registers mean AVX-512, ymm means
  AVX, SVE's z registers mean SVE. A binary that picks its code path at run time (function
  multi-versioning) is reported by what its widest path uses: such a binary is portable in
  practice, and `--portable` says so.
Only the extensions every node's inventory records (registry.inventory.ISA_FLAGS) are named, so a
node's flags can always be compared. A script (no ELF header) needs nothing here: its interpreter
is built for each node.
"""

import re
import shutil
import subprocess
from pathlib import Path

ARCH = {"EM_X86_64": "x86_64", "EM_386": "i686", "EM_AARCH64": "aarch64", "EM_ARM": "armv7l",
        "EM_PPC64": "ppc64le", "EM_S390": "s390x", "EM_RISCV": "riscv64"}
# a node's architecture (uname -m) -> the binaries' architectures it runs
RUNS = {"x86_64": {"x86_64", "i686"}, "amd64": {"x86_64", "i686"}, "aarch64": {"aarch64", "armv7l"},
        "arm64": {"aarch64", "armv7l"}}
# GNU_PROPERTY_X86_ISA_1_NEEDED bits (x86-64-v2 = 2, v3 = 4, v4 = 8) -> extensions named in ISA_FLAGS
X86_LEVELS = {4: ("avx", "avx2", "fma"), 8: ("avx", "avx2", "fma", "avx512f", "avx512vl")}
MAX_SCAN_BYTES = 16 << 20   # ~2 s of objdump
SCAN_TIMEOUT_S = 60
_REGISTERS = [("avx512f", re.compile(r"%(zmm\d|k[1-7]\b|[xy]mm(1[6-9]|2\d|3[01])\b)")),
              ("avx", re.compile(r"%ymm\d")),
              ("sve", re.compile(r"\bz\d{1,2}\.[bhsdq]\b"))]


def runs_on(node_arch: str, binary_arch: str) -> bool:
    """Whether a node of architecture `node_arch` (uname -m spelling) runs a `binary_arch` binary."""
    return binary_arch in RUNS.get(node_arch, {node_arch})


def needs(argv0: str) -> dict | None:
    """{"path", "arch", "isa": [...], "isa_from"} for the executable `argv0` (looked up on PATH);
    None when it is not an ELF file (a script) or cannot be read."""
    from elftools.common.exceptions import ELFError
    from elftools.elf.elffile import ELFFile

    path = shutil.which(argv0) or argv0
    try:
        with open(path, "rb") as f:
            elf = ELFFile(f)
            arch = ARCH.get(elf["e_machine"], str(elf["e_machine"]))
            isa = _isa_level(elf)
            text = elf.get_section_by_name(".text")
            text_size = text["sh_size"] if text is not None else 0
    except (OSError, ELFError, ValueError):
        return None
    source = "gnu-property" if isa else None
    if not isa and 0 < text_size <= MAX_SCAN_BYTES:
        isa = _registers_used(path)
        source = "code" if isa is not None else None
    return {"path": str(Path(path).resolve()), "arch": arch, "isa": sorted(isa or ()), "isa_from": source}


def _isa_level(elf) -> set[str]:
    """The extensions implied by the x86 ISA level recorded in the GNU property note (empty: none)."""
    from elftools.elf.sections import NoteSection

    out: set[str] = set()
    for section in elf.iter_sections():
        if not isinstance(section, NoteSection):
            continue
        for note in section.iter_notes():
            if note["n_type"] != "NT_GNU_PROPERTY_TYPE_0":
                continue
            for prop in note["n_desc"]:
                if prop["pr_type"] == "GNU_PROPERTY_X86_ISA_1_NEEDED" and isinstance(prop["pr_data"], int):
                    for bit, flags in X86_LEVELS.items():
                        if prop["pr_data"] & bit:
                            out.update(flags)
    return out


def _registers_used(path: str) -> set[str] | None:
    """The extensions whose registers the disassembled .text names; None when objdump is missing or fails."""
    objdump = shutil.which("objdump")
    if objdump is None:
        return None
    found: set[str] = set()
    try:
        with subprocess.Popen([objdump, "-d", "--no-show-raw-insn", "-j", ".text", path], stdout=subprocess.PIPE,
                              stderr=subprocess.DEVNULL, text=True, errors="replace") as proc:
            for line in proc.stdout:
                for flag, pattern in _REGISTERS:
                    if flag not in found and pattern.search(line):
                        found.add(flag)
                if "avx512f" in found or "sve" in found:
                    proc.kill()           # the widest extension is known: no need to read on
                    return found
            status = proc.wait(timeout=SCAN_TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return found if status == 0 else None   # e.g. another architecture's code, which this objdump cannot read
