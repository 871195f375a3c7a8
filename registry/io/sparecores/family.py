"""The CPU vendor and microarchitecture ("family") of a server: what "another CPU family" means.

One rule, in one place, used by the Spare Cores import and by anything that labels a node:

* x86-64 from lscpu's vendor id, CPU family and model numbers (and the stepping, which is what
  tells Skylake-SP from Cascade Lake on Intel model 85):
  Intel family 6: 45 Sandy Bridge, 62 Ivy Bridge, 63 Haswell, 79 Broadwell, 85 Skylake
  (stepping <= 4) / Cascade Lake (5-7) / Cooper Lake (>= 10), 106 Ice Lake, 143 Sapphire Rapids,
  158 Coffee Lake, 173 Granite Rapids, 207 Emerald Rapids;
  AMD family 23 (Zen, Zen+: models < 0x30; Zen 2: 0x30-0x7f), 25 (Zen 3: < 0x10, 0x20-0x5f;
  Zen 4: 0x10-0x1f, 0x60-0x7f; Zen 4c: 0xa0-0xaf), 26 (Zen 5: < 0x10, 0x20-0x4f; Zen 5c: 0x10-0x1f).
* Arm from the core name lscpu reports (vendor "ARM", model name "Neoverse-V1"), and the cloud,
  since a cloud's own chip is named by its product: on AWS Cortex-A72 Graviton, Neoverse-N1
  Graviton2, V1 Graviton3, V2 Graviton4, V3 Graviton5; on Azure Neoverse-N2 Cobalt 100 (Microsoft);
  on GCP Neoverse-V2 Axion C4A and Neoverse-N3 Axion N4A (Google). A Neoverse-N1 outside AWS is
  Ampere Altra: vendor Ampere, family "Neoverse-N1" (the core, as Ampere does not rename it).
* Anything else: the model name as lscpu gives it (never a guess), vendor from the vendor id.
"""

from __future__ import annotations

import re

_X86_VENDORS = {"GenuineIntel": "Intel", "AuthenticAMD": "AMD", "HygonGenuine": "Hygon"}

_INTEL_6 = {45: "Sandy Bridge", 62: "Ivy Bridge", 63: "Haswell", 79: "Broadwell", 86: "Broadwell",
            106: "Ice Lake", 108: "Ice Lake", 143: "Sapphire Rapids", 158: "Coffee Lake",
            173: "Granite Rapids", 207: "Emerald Rapids", 175: "Sierra Forest"}

# (family, first model, last model, label), first match wins
_AMD = [(23, 0x00, 0x2F, "Zen"), (23, 0x30, 0x7F, "Zen 2"),
        (25, 0x00, 0x0F, "Zen 3"), (25, 0x10, 0x1F, "Zen 4"), (25, 0x20, 0x5F, "Zen 3"),
        (25, 0x60, 0x7F, "Zen 4"), (25, 0xA0, 0xAF, "Zen 4c"),
        (26, 0x00, 0x0F, "Zen 5"), (26, 0x10, 0x1F, "Zen 5c"), (26, 0x20, 0x4F, "Zen 5")]

# (cloud or None for any, Arm core) -> (cpu vendor, family)
_ARM = {("aws", "cortex-a72"): ("AWS", "Graviton"), ("aws", "neoverse-n1"): ("AWS", "Graviton2"),
        ("aws", "neoverse-v1"): ("AWS", "Graviton3"), ("aws", "neoverse-v2"): ("AWS", "Graviton4"),
        ("aws", "neoverse-v3"): ("AWS", "Graviton5"),
        ("azure", "neoverse-n2"): ("Microsoft", "Cobalt 100"),
        ("gcp", "neoverse-v2"): ("Google", "Axion C4A"), ("gcp", "neoverse-n3"): ("Google", "Axion N4A"),
        (None, "neoverse-n1"): ("Ampere", "Neoverse-N1")}


def _int(value) -> int | None:
    try:
        return int(str(value).strip(), 0) if str(value).strip().lower().startswith("0x") else int(str(value).strip())
    except (TypeError, ValueError):
        return None


def _intel(model: int | None, stepping: int | None) -> str | None:
    if model == 85:
        if stepping is None:
            return "Skylake"
        return "Cooper Lake" if stepping >= 10 else "Cascade Lake" if stepping >= 5 else "Skylake"
    return _INTEL_6.get(model)


def _amd(family: int | None, model: int | None) -> str | None:
    for fam, lo, hi, label in _AMD:
        if family == fam and model is not None and lo <= model <= hi:
            return label
    return None


def cpu_vendor(vendor_id: str | None, model_name: str | None = None, cloud: str | None = None) -> str | None:
    """The CPU's maker as people say it (Intel, AMD, AWS, Ampere, Microsoft, Google, ARM)."""
    return classify(vendor_id, model_name, None, None, None, cloud)[0]


def cpu_family(vendor_id: str | None, model_name: str | None, family=None, model=None, stepping=None,
               cloud: str | None = None) -> str | None:
    """The microarchitecture label ('Zen 4', 'Sapphire Rapids', 'Graviton3', 'Neoverse-N1', ...);
    None when nothing is known. Numbers may be ints or lscpu's strings. See the module doc."""
    return classify(vendor_id, model_name, family, model, stepping, cloud)[1]


def classify(vendor_id, model_name, family=None, model=None, stepping=None,
             cloud: str | None = None) -> tuple[str | None, str | None]:
    """(cpu_vendor, cpu_family) by the rule of the module doc."""
    vendor_id = (vendor_id or "").strip()
    name = re.sub(r"\s+", " ", (model_name or "").strip())
    cloud = (cloud or "").strip().lower() or None
    if vendor_id in _X86_VENDORS:
        vendor = _X86_VENDORS[vendor_id]
        fam, mod = _int(family), _int(model)
        label = (_intel(mod, _int(stepping)) if vendor == "Intel" and fam == 6
                 else _amd(fam, mod) if vendor == "AMD" else None)
        return vendor, label or (name or None)
    core = name.lower()
    for key in ((cloud, core), (None, core)):
        if key in _ARM:
            return _ARM[key]
    if vendor_id.upper() == "ARM" or core.startswith(("neoverse", "cortex")):
        return "ARM", name or None
    return (vendor_id or None), (name or None)


_NAME_NOISE = re.compile(r"\((?:r|tm)\)|\b(?:cpu|processor)\b|@.*$|\b\d+-core\b", re.I)


def _model_key(name: str | None) -> str:
    return " ".join(_NAME_NOISE.sub(" ", str(name or "").lower()).split())


def same_cpu(a: str | None, b: str | None) -> bool | None:
    """Whether two model names (lscpu's, a tool's own report) name one CPU model, as far as names
    tell: trademarks, 'CPU', the clock and the core count aside ('Intel(R) Xeon(R) Platinum 8370C
    CPU @ 2.80GHz' is 'Intel Xeon Platinum 8370C'); None when either names nothing (empty, llama.cpp's
    'CPU' on Arm, the 'GENUINE INTEL(R) 0000' of an unreleased part)."""
    ka, kb = _model_key(a), _model_key(b)
    if not ka or not kb or "0000" in ka or "0000" in kb:
        return None
    return ka == kb or ka in kb or kb in ka
