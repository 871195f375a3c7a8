"""The microbenchmark build cache keeps one build per CPU: a home directory shared over NFS by node
types with different instruction sets must never hand one of them a binary built for another."""

from registry.inventory import cpu_identity
from registry.microbench import build

X86 = "processor\t: 0\nvendor_id\t: GenuineIntel\ncpu family\t: 6\nmodel\t\t: 143\n" \
      "model name\t: Intel(R) Xeon(R) Platinum 8480+\nflags\t\t: fpu sse2 avx2 {extra}\n\n" \
      "processor\t: 1\nvendor_id\t: GenuineIntel\n"


def _root(tmp_path, name: str, extra: str):
    (tmp_path / name / "proc").mkdir(parents=True)
    (tmp_path / name / "proc" / "cpuinfo").write_text(X86.format(extra=extra))
    return tmp_path / name


def test_cpu_identity_tells_instruction_sets_apart(tmp_path):
    plain, wide = _root(tmp_path, "a", ""), _root(tmp_path, "b", "avx512f")
    assert cpu_identity(plain) != cpu_identity(wide)
    assert "Platinum 8480+" in cpu_identity(plain) and "avx512f" in cpu_identity(wide)
    assert cpu_identity(plain) == cpu_identity(_root(tmp_path, "c", ""))  # same CPU, same key


def test_another_cpu_gets_its_own_build(tmp_path, monkeypatch):
    monkeypatch.setenv("NODEREG_BUILD_CACHE", str(tmp_path / "cache"))
    src = tmp_path / "k.c"
    src.write_text("int main(void) { return 0; }\n")
    here = build.compile_c([src], "k", openmp=False)
    assert build.compile_c([src], "k", openmp=False) == here    # cached for this CPU
    monkeypatch.setattr(build, "cpu_identity", lambda: "x86_64|GenuineIntel|6|143|another CPU|avx512f")
    there = build.compile_c([src], "k", openmp=False)
    assert there != here and there.exists() and here.exists()
