"""The instruction mix of machine code, read with objdump: what kind of work a loop does.

registry.measure.hotmix samples where a program spends its time; this module says what the code
there does. A function is disassembled once (`objdump -d --disassemble=SYMBOL`, x86-64 in AT&T
syntax or AArch64), each instruction classified as floating-point arithmetic, a load, a store
and/or a conditional branch, and a sampled address is described by the innermost loop that holds
it: the span from a backward branch's target to the branch. A timer sample lands anywhere in the
loop that is running, so the loop's body, not the one instruction under the sample, is what ran.
A sample outside any loop is described by the instructions around it.

Static: each instruction of the loop counts once whatever it costs, and a memory operand is a
load whether it hits L1 or DRAM (the working set says which). What it tells apart is what /proc
cannot: a register-blocked matrix product (many FP operations per memory operand) from a stream
(a memory operand per FP operation or more), integer and branchy code from FP code.
"""

from __future__ import annotations

import bisect
import functools
import itertools
import re
import subprocess
from dataclasses import dataclass

KINDS = ("fp", "load", "store", "branch")
AROUND = 8    # instructions each side of a sampled address outside every loop

_LINE = re.compile(r"^\s*([0-9a-f]+):\s+(\S+)\s*(.*?)\s*$")
_TARGET = re.compile(r"^([0-9a-f]+)\s+<")
# x86 FP arithmetic (SSE/AVX, scalar and packed, FP16 to FP64), its AVX prefix 'v' stripped
_X86_FP = re.compile(r"^(add|sub|mul|div|sqrt|min|max|rcp\d*|rsqrt\d*|hadd|hsub|dp|addsub|"
                     r"f(n?)m(add|sub)\d+|fmaddsub\d+|fmsubadd\d+)(ps|pd|ss|sd|ph|sh)$")
_X87_FP = re.compile(r"^f(add|sub|subr|mul|div|divr|sqrt)p?[sl]?$")
# memory operands these read only, wherever they stand (comparisons, pushes, indirect jumps and calls)
_X86_READS = ("cmp", "test", "bt", "ucomi", "comi", "vucomi", "vcomi", "ptest", "vptest", "push", "call", "jmp")
_X86_NO_ACCESS = ("lea", "nop", "prefetch", "clflush", "endbr")
# a memory destination these write without reading it (the others read it too: add %eax,(%rdx))
_X86_PURE_STORE = re.compile(r"^v?(p?mov|movnt|stos|set|pmov|kmov|cvt|extract|pextr|compress|scatter)")
_A64_FP = re.compile(r"^f(add|sub|mul|div|mla|mls|madd|msub|nmadd|nmsub|nmul|sqrt|max|min|maxnm|minnm|mad|msb)"
                     r"(p|v)?$")
_A64_BRANCH = re.compile(r"^(b\.\w+|cbn?z|tbn?z)$")
_A64_JUMP = re.compile(r"^(b|b\.\w+|cbn?z|tbn?z)$")
_PREFIXES = frozenset({"rep", "repz", "repnz", "repe", "repne", "lock", "notrack", "bnd", "data16", "cs", "ds"})


@dataclass(frozen=True, slots=True)
class Insn:
    addr: int
    mnemonic: str
    operands: str
    kinds: frozenset[str]        # of KINDS
    target: int | None           # a direct branch's target address


def _split_operands(operands: str) -> list[str]:
    """AT&T operands split at the commas outside parentheses (`0x8(%rax,%rbx,8),%ymm0`)."""
    out, depth, start = [], 0, 0
    for i, ch in enumerate(operands):
        depth += ch == "("
        depth -= ch == ")"
        if ch == "," and depth == 0:
            out.append(operands[start:i])
            start = i + 1
    out.append(operands[start:])
    return [o.strip() for o in out if o.strip()]


def classify_x86(mnemonic: str, operands: str) -> frozenset[str]:
    """The KINDS of one x86-64 instruction in AT&T syntax (source operands first, destination last)."""
    kinds = set()
    base = mnemonic.split(".")[0]
    bare = base[1:] if base.startswith("v") else base
    if _X86_FP.match(bare) or _X87_FP.match(base):
        kinds.add("fp")
    if base.startswith("j") and base != "jmp" or base.startswith("loop"):
        kinds.add("branch")
    ops = _split_operands(operands.split("#", 1)[0]) if "(" in operands else []
    if not ops or base.startswith(_X86_NO_ACCESS):
        return frozenset(kinds)
    if base.startswith(_X86_READS):
        kinds.add("load")
        return frozenset(kinds)
    if any("(" in o for o in ops[:-1]):
        kinds.add("load")
    if "(" in ops[-1]:
        kinds.add("store")
        if not _X86_PURE_STORE.match(base):
            kinds.add("load")
    return frozenset(kinds)


def classify_a64(mnemonic: str, operands: str) -> frozenset[str]:
    """The KINDS of one AArch64 instruction."""
    kinds = set()
    if _A64_FP.match(mnemonic):
        kinds.add("fp")
    if _A64_BRANCH.match(mnemonic):
        kinds.add("branch")
    if mnemonic.startswith("ld") and "[" in operands:
        kinds.add("load")
    if mnemonic.startswith("st") and "[" in operands:
        kinds.add("store")
    return frozenset(kinds)


def parse(text: str) -> tuple[Insn, ...]:
    """objdump -d --no-show-raw-insn output -> its instructions (labels and blank lines skipped)."""
    classify = classify_a64 if "aarch64" in text[:500] else classify_x86
    out = []
    for line in text.splitlines():
        m = _LINE.match(line)
        if not m:
            continue
        addr, mnemonic, operands = int(m.group(1), 16), m.group(2), m.group(3)
        while mnemonic in _PREFIXES and operands:
            mnemonic, _, operands = operands.partition(" ")
            operands = operands.strip()
        if mnemonic.startswith(("(bad)", ".")):
            continue
        jumps = mnemonic.startswith(("j", "loop")) if classify is classify_x86 else _A64_JUMP.match(mnemonic)
        target = _TARGET.match(operands.split(",")[-1].strip()) if jumps else None
        out.append(Insn(addr, mnemonic, operands, classify(mnemonic, operands),
                        int(target.group(1), 16) if target else None))
    return tuple(out)


def loops(insns: tuple[Insn, ...]) -> list[tuple[int, int]]:
    """(first, last) instruction addresses of every loop: a branch back to an address of its own
    function at or before it."""
    if not insns:
        return []
    lo = insns[0].addr
    return [(i.target, i.addr) for i in insns if i.target is not None and lo <= i.target <= i.addr]


@dataclass(frozen=True)
class Code:
    """Instructions in address order with what a sample's lookup needs: their addresses, the loops
    innermost first, and running counts of each kind (a region's mix is two lookups, not a pass:
    a Python program's samples fall on thousands of places in the interpreter's loop)."""
    insns: tuple[Insn, ...]
    addrs: tuple[int, ...]
    loops: tuple[tuple[int, int], ...]              # (first, last) address, shortest first
    counts: dict[str, tuple[int, ...]]              # kind -> instructions of that kind before index i

    @classmethod
    def of(cls, insns: tuple[Insn, ...]) -> Code:
        counts = {k: tuple(itertools.accumulate((k in i.kinds for i in insns), initial=0)) for k in KINDS}
        return cls(insns, tuple(i.addr for i in insns), tuple(sorted(loops(insns), key=lambda ab: ab[1] - ab[0])),
                   counts)


EMPTY = Code.of(())


def _objdump(args: list[str]) -> Code:
    """objdump -d --no-show-raw-insn ARGS read into Code (empty when objdump cannot read it)."""
    try:
        res = subprocess.run(["objdump", "-d", "--no-show-raw-insn", *args], capture_output=True, text=True,
                             timeout=60)
    except (OSError, subprocess.SubprocessError):
        return EMPTY
    return Code.of(parse(res.stdout)) if res.returncode == 0 else EMPTY


@functools.lru_cache(maxsize=512)
def function(dso: str, symbol: str) -> Code:
    """The instructions of `symbol` in the ELF file `dso`."""
    return _objdump([f"--disassemble={symbol}", dso])


def _mix_in(code: Code, addr: int) -> dict[str, float] | None:
    """Shares of KINDS among the instructions of the innermost loop of `code` that holds `addr` (or
    the AROUND instructions each side, outside every loop); None when `addr` lies outside them."""
    if not code.addrs or not code.addrs[0] <= addr <= code.addrs[-1]:
        return None
    loop = next(((a, b) for a, b in code.loops if a <= addr <= b), None)
    if loop:
        lo, hi = bisect.bisect_left(code.addrs, loop[0]), bisect.bisect_right(code.addrs, loop[1])
    else:
        at = bisect.bisect_left(code.addrs, addr)
        lo, hi = max(0, at - AROUND), min(len(code.addrs), at + AROUND + 1)
    return {k: (code.counts[k][hi] - code.counts[k][lo]) / (hi - lo) for k in KINDS}


@functools.lru_cache(maxsize=4096)
def region_mix(dso: str, symbol: str, offset: int) -> dict[str, float] | None:
    """The mix (`_mix_in`) at `offset` bytes into the function `symbol` of `dso`."""
    code = function(dso, symbol)
    return _mix_in(code, code.addrs[0] + offset) if code.addrs else None


CHUNK = 4096    # code without symbols is read a page at a time, with MARGIN bytes each side
MARGIN = 1024


@functools.cache
def _segments(dso: str) -> tuple[tuple[int, int, int], ...]:
    """(file offset, virtual address, size) of the loadable segments of `dso` (objdump -p)."""
    try:
        res = subprocess.run(["objdump", "-p", dso], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return ()
    out = []
    for m in re.finditer(r"LOAD off\s+0x([0-9a-f]+) vaddr 0x([0-9a-f]+).*\n\s+filesz 0x([0-9a-f]+)", res.stdout):
        out.append((int(m.group(1), 16), int(m.group(2), 16), int(m.group(3), 16)))
    return tuple(out)


@functools.lru_cache(maxsize=512)
def _chunk(dso: str, first: int) -> Code:
    """The instructions of `dso` from virtual address `first` - MARGIN to `first` + CHUNK + MARGIN
    (x86 code read from an arbitrary address falls into step within a few instructions)."""
    return _objdump([f"--start-address={max(0, first - MARGIN)}", f"--stop-address={first + CHUNK + MARGIN}", dso])


@functools.lru_cache(maxsize=4096)
def region_mix_at(dso: str, file_offset: int) -> dict[str, float] | None:
    """The mix (`_mix_in`) at the code `file_offset` bytes into `dso`, a file without a symbol
    there: its loop is found among the instructions of the page around it."""
    for off, vaddr, size in _segments(dso):
        if off <= file_offset < off + size:
            addr = file_offset - off + vaddr
            return _mix_in(_chunk(dso, addr - addr % CHUNK), addr)
    return None
