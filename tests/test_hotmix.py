"""Source `mix` (registry/measure/hotmix.py, disasm.py): perf's timer samples, described by the
instruction mix of the loop they land in, tell kinds of work apart on a node without a PMU
(issue 28, item 2). Without it, a register-blocked matrix product (numpy's) matched the memory
load, the triad and `mbw1c` at similarity 1.00: only the working set told kernels apart, and the
product's arrays exceed the last-level cache."""

import contextlib
import functools
import os
import subprocess
import sys
import time

import numpy as np
import pytest

from registry.measure import disasm, hotmix, runner
from registry.microbench.driver import Driver
from registry.models.base import Matrix, Query, ReferenceSet
from registry.models.similarity import SimilarityModel
from registry.profile import catalog, signatures
from registry.profile.sweep import Config

CPU = min(os.sched_getaffinity(0))

X86 = """
/bin/prog:     file format elf64-x86-64

Disassembly of section .text:

0000000000001100 <triad>:
    1100:	xor    %eax,%eax
    1102:	vmovsd (%rsi,%rax,8),%xmm1
    1107:	vfmadd213sd (%rdx,%rax,8),%xmm0,%xmm1
    110d:	vmovsd %xmm1,(%rdi,%rax,8)
    1112:	add    $0x1,%rax
    1116:	cmp    %rax,%rcx
    1119:	jne    1102 <triad+0x2>
    111b:	addq   $0x1,0x8(%rsp)
    1121:	lea    0x10(%rsp),%rdi
    1126:	rep stos %rax,%es:(%rdi)
    1129:	ret
"""

A64 = """
/bin/prog:     file format elf64-littleaarch64

Disassembly of section .text:

0000000000400600 <triad>:
  400600:	ldr	d1, [x1, x3, lsl #3]
  400604:	ldr	d2, [x2, x3, lsl #3]
  400608:	fmadd	d1, d2, d0, d1
  40060c:	str	d1, [x0, x3, lsl #3]
  400610:	add	x3, x3, #0x1
  400614:	cmp	x4, x3
  400618:	b.ne	400600 <triad>
  40061c:	ret
"""


def test_x86_instructions_are_classified_by_their_operands():
    insns = {i.addr: i for i in disasm.parse(X86)}
    assert insns[0x1102].kinds == {"load"}
    assert insns[0x1107].kinds == {"fp", "load"}          # FMA with a memory source
    assert insns[0x110d].kinds == {"store"}               # a plain store does not read
    assert insns[0x1119].kinds == {"branch"} and insns[0x1119].target == 0x1102
    assert insns[0x111b].kinds == {"load", "store"}       # read-modify-write
    assert insns[0x1121].kinds == frozenset()             # lea computes an address, reads nothing
    assert insns[0x1126].mnemonic == "stos" and insns[0x1126].kinds == {"store"}   # the prefix skipped


def test_a_sample_is_described_by_the_innermost_loop_holding_it():
    insns = disasm.parse(X86)
    assert disasm.loops(insns) == [(0x1102, 0x1119)]
    inside = disasm._mix_in(disasm.Code.of(insns), 0x110d)
    # the loop's 6 instructions: 2 loads (one with the FMA), 1 FP, 1 store, 1 branch
    assert inside == pytest.approx({"fp": 1 / 6, "load": 2 / 6, "store": 1 / 6, "branch": 1 / 6})
    assert disasm._mix_in(disasm.Code.of(insns), 0x2000) is None
    # outside every loop: the AROUND instructions each side (here the whole function but the first)
    assert disasm._mix_in(disasm.Code.of(insns), 0x1126)["store"] == pytest.approx(3 / 10)
    a64 = disasm.parse(A64)
    assert disasm.loops(a64) == [(0x400600, 0x400618)]
    assert disasm._mix_in(disasm.Code.of(a64), 0x400608) == pytest.approx({"fp": 1 / 7, "load": 2 / 7, "store": 1 / 7,
                                                           "branch": 1 / 7})


def test_perf_script_samples_without_a_symbol_keep_their_file_offset():
    text = """\
 24810 78547.326516: PERF_RECORD_MMAP2 24810/24810: [0x7f801734d000(0x1d000) @ 0x4000 fe:00 339700 0]: r-xp /lib/lzma.so
 24810 78547.332274:      7f801735f932 [unknown] (/lib/lzma.so)
 24810 78547.342297:      7f8017360358 lzma_code+0x1a (/lib/lzma.so)
 24811 78547.352297:      55587640a000 [unknown] ([unknown])
garbage line
"""
    samples = hotmix.parse(text)
    assert [(s.symbol, s.offset) for s in samples] == [("", 0x7f801735f932 - 0x7f801734d000 + 0x4000),
                                                         ("lzma_code", 0x1a), ("[unknown]", 0)]
    assert samples[0].t_s == pytest.approx(78547.332274)
    assert hotmix.mix(samples) == {}      # fewer than MIN_SAMPLES described


pytestmark_perf = pytest.mark.skipif(not hotmix.available(), reason="perf cannot record cpu-clock samples here")

# kernel, working set in bytes (0: none): the instruction mix does not depend on the cache level
REFERENCES = [("peak_fma", 0), ("scalar_fp64", 0), ("fp_chain", 0), ("int_ops", 0), ("int_branch", 0),
              ("triad", 24 << 10), ("load", 16 << 10), ("store", 16 << 10), ("chase", 8 << 10)]
COMPUTE_FP = {"peak_fma", "scalar_fp64", "fp_chain"}
MATMUL = ("import numpy as np\na = np.random.default_rng(0).random((1200, 1200))\n"
          "for _ in range(4):\n    a = a @ a\n    a /= np.abs(a).max()\n")
# program -> the references of its own kind
KINDS = {"fma 4000000": COMPUTE_FP, "stream 16000000": {"triad", "load", "store"}, "hash 400000000": {"int_branch"}}


@pytest.fixture(scope="module")
def references(binary):
    out = {}
    with Driver(binary) as driver:
        for name, ws in REFERENCES:
            per_element = {"triad": 24, "load": 8, "store": 8}.get(name, 64)
            config = Config(ub=catalog.get(name), threads=1, placement="compact", cpus=(CPU,),
                            n=ws // per_element if ws else None, line=64 if name == "chase" else None,
                            level="L1" if ws else None)
            out[name] = signatures.measure(driver, config, None)["mix"]
    return out


def _sampled_mix(argv: list[str]) -> dict[str, float]:
    """The mix of a whole run, sampled as `nodereg trace` samples it (perf attached to the command)."""
    samples: list[hotmix.Sample] = []
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"}
    result = runner.run(argv, env=env, wss=False, stdout=subprocess.DEVNULL,
                        attach=functools.partial(hotmix.watching, into=samples))
    assert result.status == "ok"
    return hotmix.mix(samples)


@pytestmark_perf
def test_the_references_mixes_differ_by_kind(references):
    assert references["peak_fma"]["fp_share"] > 0.5 > references["triad"]["fp_share"]
    assert references["int_ops"]["fp_share"] < 0.05 and references["int_branch"]["fp_share"] < 0.05
    assert references["int_branch"]["branch_share"] > 2 * references["peak_fma"]["branch_share"]
    assert references["store"]["store_share"] > 0.3 > 0.05 > references["load"]["store_share"]


def _model(references: dict[str, dict[str, float]]) -> SimilarityModel:
    rows = list(references)
    columns = sorted(f"mix.{m}" for m in references[rows[0]])
    values = np.array([[references[r][c.split(".", 1)[1]] for c in columns] for r in rows])
    # the distance does not read the ratios (relevance_power=0: the shipped prior weights only)
    return SimilarityModel(relevance_power=0).fit(
        ReferenceSet("base", Matrix(rows, columns, values), Matrix(rows, ["other"], np.zeros((len(rows), 1)))))


@pytestmark_perf
@pytest.mark.parametrize("program_args", list(KINDS))
def test_each_program_matches_a_reference_of_its_own_kind_by_its_mix(program_args, references,
                                                                     kinds_program):
    mix = _sampled_mix([str(kinds_program), *program_args.split()])
    assert mix, "no described samples"
    nearest = _model(references).nearest(Query(program_args, {f"mix.{m}": v for m, v in mix.items()}, 1.0), 3)
    assert nearest[0][0] in KINDS[program_args], (mix, nearest)


@pytest.fixture(scope="module")
def gemm_mix(binary):
    """The mix of gemm's signature window, at its one-thread L2 size of this VM (N = 128)."""
    with Driver(binary) as driver:
        config = Config(ub=catalog.get("gemm"), threads=1, placement="compact", cpus=(CPU,), n=128, level="L2")
        return signatures.measure(driver, config, None)["mix"]


@pytestmark_perf
def test_gemm_is_a_register_tile_by_its_mix(references, gemm_mix):
    """gemm keeps a tile of C in registers and loads a vector of B and an element of A per several
    FMAs (16 FMAs per 8 loads with AVX-512 or AArch64, 8 per 6 with 16 vector registers: microbench/
    ub_gemm.c): more FP operations than loads, few stores, unlike the streams (a load or more per FP
    operation). Its FP share is 1.85x the triad's on an AVX2-only guest (0.436 against 0.235), above
    2x with AVX-512."""
    assert gemm_mix["fp_share"] > max(gemm_mix["load_share"], 1.5 * references["triad"]["fp_share"])
    assert gemm_mix["fp_per_load"] >= 0 > references["triad"]["fp_per_load"]
    assert gemm_mix["store_share"] < references["triad"]["store_share"] / 3


@pytestmark_perf
def test_a_blocked_matrix_product_is_not_a_stream_by_its_mix(references, gemm_mix):
    """numpy's product reuses each loaded operand (about two FP operations per load, few stores): of
    the other references none sits on it. Its mix lies between the streams' and the FP peak's, so
    without gemm the working set (memory-level: its arrays exceed the cache) pulled it toward the
    memory kernels (docs/match.md, "Features without counters"); gemm, the reference of its kind,
    is nearest it by the mix alone."""
    mix = _sampled_mix([sys.executable, "-c", MATMUL])
    assert references["triad"]["fp_per_load"] < references["load"]["fp_per_load"] < mix["fp_per_load"] \
        < references["peak_fma"]["fp_per_load"]
    assert mix["store_share"] < references["triad"]["store_share"] / 3
    query = Query("matmul", {f"mix.{m}": v for m, v in mix.items()}, 1.0)
    nearest = _model(references).nearest(query, 1)
    assert nearest[0][1] > 0.3, nearest    # standardised RMS units: far from every other reference
    nearest = _model({**references, "gemm": gemm_mix}).nearest(query, 2)
    assert nearest[0][0] == "gemm", (mix, gemm_mix, nearest)


@pytestmark_perf
def test_one_perf_samples_every_window_of_a_driver(binary, monkeypatch):
    """`measure_all` starts one perf per driver, not one per window (0.08 s each, and each sampled
    only the half of its window after it was ready), and gives each window the mix of its own
    stretch of the samples: the FP kernel's and the store kernel's differ as their own windows'."""
    started = []
    real = hotmix.watching
    monkeypatch.setattr(hotmix, "watching", lambda pid, **kw: started.append(pid) or real(pid, **kw))
    configs = [Config(ub=catalog.get(name), threads=1, placement="compact", cpus=(CPU,), n=n, level=level)
               for name, n, level in (("peak_fma", None, None), ("store", 2048, "L1"), ("int_branch", None, None),
                                      ("triad", (64 << 20) // 24, "memory"))]
    with Driver(binary) as sweep:
        sigs = signatures.measure_all(sweep, configs, 32 << 20)
    assert len(started) == 2                                    # the small driver's and the sweep's
    mixes = {c.ub.name: sigs[c.key]["mix"] for c in configs}
    assert mixes["peak_fma"]["fp_share"] > 0.5 > 0.3 > mixes["store"]["fp_share"]
    assert mixes["store"]["store_share"] > 0.3 > mixes["peak_fma"]["store_share"]
    assert mixes["int_branch"]["branch_share"] > 2 * mixes["peak_fma"]["branch_share"]
    assert mixes["triad"]["fp_share"] < 0.5


@pytestmark_perf
def test_children_started_at_once_are_sampled_and_the_wait_is_not_timed(kinds_program):
    """perf attaches about 0.2 s after the command starts; the runner holds the command at a gate
    until then. Without it, a script that starts its workers at once (a launcher, the Redis
    validation's servers) left perf nothing to sample, and its wait would count as run time."""
    samples: list[hotmix.Sample] = []
    result = runner.run(["/bin/sh", "-c", f"{kinds_program} fma 4000000 & wait"], wss=False,
                        stdout=subprocess.DEVNULL, attach=functools.partial(hotmix.watching, into=samples))
    assert result.status == "ok"
    mix = hotmix.mix(samples)
    assert mix and mix["fp_share"] > 0.5, (len(samples), mix)
    timed = runner.run(["sleep", "0.5"], wss=False, attach=functools.partial(hotmix.watching, into=[]))
    assert 0.5 <= timed.wall_s < 0.62, timed.wall_s


def test_the_run_starts_before_the_gated_command_whatever_the_tracer_waits(monkeypatch, tmp_path):
    """The run's clock starts just before the gate's line is written. Taken after it, a tracer that
    lost its CPU in between (here: 0.2 s, injected after the write) started the clock after the
    command had begun: a 1-ms OpenMP program's region then began 3.6 ms before the run and weighed
    4.8 runs, and its trace file could not be read back (the fresh-clone CI of stop 18)."""
    real_write = runner.os.write

    def slow_write(fd, data):
        written = real_write(fd, data)
        if data == b"\n":
            time.sleep(0.2)
        return written

    monkeypatch.setattr(runner.os, "write", slow_write)
    printed = tmp_path / "started"
    with open(printed, "w") as out:
        result = runner.run([sys.executable, "-S", "-c", "import time; print(repr(time.monotonic()))"],
                            wss=False, stdout=out.fileno(), attach=lambda pid: contextlib.nullcontext())
    assert result.status == "ok"
    assert result.t0_monotonic <= float(printed.read_text())
