"""vCPUs and memory of a cloud VM from its type name, where the name's convention says them.

Imports of external measurements (Lumos) and of node specs (`nodereg import specs`) name VMs by
type; the conventions of the major clouds are read here, table-driven, and a name that follows none
of them is reported as not understood (vcpus None) rather than guessed:

* Huawei ``<family>.<size>.<GiB per vCPU>``: ``s6.xlarge.2`` = 4 vCPUs x 2 GiB.
* Alibaba ``[ecs.]<family>.<size>`` and AWS ``<family>.<size>``: the size word gives the vCPUs
  (small/medium 1, large 2, xlarge 4, Nxlarge 4N; AWS burstable ``t`` nano-medium 2), the family's
  letter the memory per vCPU: c 2 GiB, g/m/t 4, r/i/z 8, x 16 (Alibaba ``hfc6`` etc. as their
  letter; ``t5-lc1m2``: 1 core : 2 GiB). Other families (``ic5``, ``p3``): vCPUs only.
* Tencent ``<FAMILY>.<SIZE><GiB>`` (upper case): ``S5.LARGE8`` = 4 vCPUs, 8 GiB (SMALL 1, MEDIUM 2,
  LARGE 4, NXLARGE 4N vCPUs; the trailing number is the memory).
* Azure ``Standard_<family><vCPUs>[-<active vCPUs>]<features>[_v<N>]``: ``Standard_D4s_v5`` =
  4 vCPUs, 16 GiB (memory per vCPU: D 4 and E 8 from v3 on, F 2, L 8 from v2 on; others vCPUs only).
* GCP ``<series>-<type>-<vCPUs>``: ``n2-standard-8`` = 8 vCPUs x 4 GB, ``e2-highmem-4`` = 4 x 8
  (highcpu 1, 2 on c3; n1: 3.75 / 6.5 / 0.9), ``n2-custom-8-16384`` = 8 vCPUs, 16,384 MB;
  shared-core ``e2-micro/small/medium``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_MAX_VCPUS, _MAX_MEMORY = 2**16, 2**50      # beyond any VM: such a type name says nothing (nor fits the columns)
GIB = 2**30

_DOTTED_GIB_PER_VCPU = {"c": 2, "g": 4, "m": 4, "t": 4, "r": 8, "i": 8, "z": 8, "x": 16}
_AWS_BURSTABLE = {"nano": 0.5, "micro": 1, "small": 2, "medium": 4}        # t2/t3/t4g: 2 vCPUs each
_TENCENT_VCPUS = {"SMALL": 1, "MEDIUM": 2, "LARGE": 4}
_AZURE = {"D": (4, 3), "E": (8, 3), "F": (2, 1), "L": (8, 2)}             # family: (GiB per vCPU, from version)
_GCP_TYPES = {"standard": 4, "highmem": 8, "highcpu": 1}
_GCP_SERIES = {("n1", "standard"): 3.75, ("n1", "highmem"): 6.5, ("n1", "highcpu"): 0.9, ("c3", "highcpu"): 2}
_GCP_SHARED = {"e2-micro": (2, 1), "e2-small": (2, 2), "e2-medium": (2, 4), "f1-micro": (1, 0.6),
               "g1-small": (1, 1.7)}

_TENCENT = re.compile(r"(?P<family>[A-Z]+[0-9]*[A-Za-z]*)\.(?P<n>[0-9]*)(?P<size>SMALL|MEDIUM|LARGE|XLARGE)"
                      r"(?P<gib>[0-9]+)")
_AZURE_NAME = re.compile(r"standard_(?P<family>[a-z]+?)(?P<vcpus>[0-9]+)(?:-[0-9]+)?[a-z]*(?:_v(?P<v>[0-9]+))?",
                         re.IGNORECASE)
_GCP_NAME = re.compile(r"(?P<series>[a-z][a-z0-9]*)-(?P<type>standard|highmem|highcpu)-(?P<vcpus>[0-9]+)")
_GCP_CUSTOM = re.compile(r"(?:(?P<series>[a-z][a-z0-9]*)-)?custom-(?P<vcpus>[0-9]+)-(?P<mb>[0-9]+)(?:-ext)?")


@dataclass(frozen=True)
class VmShape:
    vcpus: int | None
    memory_bytes: int | None
    convention: str | None = None     # whose naming was read: huawei, alibaba/aws, tencent, azure, gcp

    @property
    def understood(self) -> bool:
        return self.vcpus is not None


NOT_UNDERSTOOD = VmShape(None, None)


def _shape(vcpus: int | None, gib_per_vcpu: float | None, convention: str, gib: float | None = None) -> VmShape:
    if vcpus is None or not 0 < vcpus <= _MAX_VCPUS:
        return NOT_UNDERSTOOD
    total = gib if gib is not None else (vcpus * gib_per_vcpu if gib_per_vcpu else None)
    memory = int(total * GIB) if total else None
    return VmShape(vcpus, memory if memory is None or memory <= _MAX_MEMORY else None, convention)


def _size_vcpus(size: str) -> int | None:
    """vCPUs of a size word: small/medium 1, large 2, xlarge 4, Nxlarge 4N (Alibaba, Huawei, AWS)."""
    if size in ("small", "medium"):
        return 1
    if size == "large":
        return 2
    m = re.fullmatch(r"([0-9]*)xlarge", size)
    if m and int(m.group(1) or 1):            # '0xlarge' names no VM
        return 4 * int(m.group(1) or 1)
    return None


def vm_shape(name: str) -> VmShape:
    """vCPUs and memory from a VM type name; NOT_UNDERSTOOD (vcpus None) when no convention fits."""
    for reader in (_tencent, _azure, _gcp, _dotted):
        shape = reader(name.strip())
        if shape is not None:
            return shape
    return NOT_UNDERSTOOD


def _tencent(name: str) -> VmShape | None:
    m = _TENCENT.fullmatch(name)          # case matters: upper case is Tencent's
    if not m:
        return None
    n = int(m["n"] or 1)
    vcpus = 4 * n if m["size"] == "XLARGE" else (_TENCENT_VCPUS[m["size"]] if not m["n"] else None)
    return _shape(vcpus, None, "tencent", gib=float(m["gib"]))


def _azure(name: str) -> VmShape | None:
    m = _AZURE_NAME.fullmatch(name)
    if not m:
        return None
    ratio, since = _AZURE.get(m["family"].upper(), (None, 0))
    version = int(m["v"] or 1)
    return _shape(int(m["vcpus"]), ratio if version >= since else None, "azure")


def _gcp(name: str) -> VmShape | None:
    name = name.lower()
    if name in _GCP_SHARED:
        vcpus, gib = _GCP_SHARED[name]
        return _shape(vcpus, None, "gcp", gib=gib)
    m = _GCP_CUSTOM.fullmatch(name)
    if m:
        return _shape(int(m["vcpus"]), None, "gcp", gib=int(m["mb"]) / 1024)
    m = _GCP_NAME.fullmatch(name)
    if not m:
        return None
    ratio = _GCP_SERIES.get((m["series"], m["type"]), _GCP_TYPES[m["type"]])
    return _shape(int(m["vcpus"]), ratio, "gcp")


def _dotted(name: str) -> VmShape | None:
    """Huawei's three-part names, Alibaba's and AWS's two-part ones."""
    parts = name.lower().split(".")
    if parts and parts[0] == "ecs":
        parts = parts[1:]
    if len(parts) < 2:
        return None
    family, size = parts[0], parts[1]
    if len(parts) >= 3 and re.fullmatch(r"\d+(\.\d+)?", parts[2]):
        return _shape(_size_vcpus(size), float(parts[2]), "huawei")
    letter = re.fullmatch(r"(?:hf)?([a-z])\d+[a-z0-9-]*", family)
    if letter and letter.group(1) == "t" and size in _AWS_BURSTABLE and "-" not in family:
        return _shape(2, None, "alibaba/aws", gib=_AWS_BURSTABLE[size])
    ratio = re.search(r"c(\d+)m(\d+)$", family)        # burstable 't5-lc1m2': 1 core : 2 GiB
    gib_per_vcpu = None
    if ratio and int(ratio.group(1)):
        gib_per_vcpu = int(ratio.group(2)) / int(ratio.group(1))
    elif letter and re.fullmatch(r"(?:hf)?[a-z]\d+[a-z]*", family):
        gib_per_vcpu = _DOTTED_GIB_PER_VCPU.get(letter.group(1))
    return _shape(_size_vcpus(size), gib_per_vcpu, "alibaba/aws")
