"""Choosing nodes by what they are: cloud vendor, architecture, CPU family, vCPUs.

One filter, as SQL over the nodes table (alias `n`), so that listing thousands of imported server
types stays one query. Text matches ignore case; each option may be given several times (any of
them matches); architecture accepts the usual other spellings (arm64 for aarch64, amd64 / x64 for
x86_64), as `uname -m` spells them is what is stored.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from registry.errors import UserError

_ARCH_ALIASES = {"arm64": "aarch64", "armv8": "aarch64", "amd64": "x86_64", "x64": "x86_64", "x86-64": "x86_64"}


@dataclass
class NodeFilter:
    vendors: list[str] = field(default_factory=list)
    archs: list[str] = field(default_factory=list)
    families: list[str] = field(default_factory=list)
    cpu_vendors: list[str] = field(default_factory=list)
    min_vcpus: int | None = None
    max_vcpus: int | None = None

    def __post_init__(self) -> None:
        if self.min_vcpus is not None and self.max_vcpus is not None and self.min_vcpus > self.max_vcpus:
            raise UserError(f"--min-vcpus {self.min_vcpus} is above --max-vcpus {self.max_vcpus}: no node can match")
        self.archs = [_ARCH_ALIASES.get(a.strip().lower(), a.strip().lower()) for a in self.archs]

    @property
    def active(self) -> bool:
        return bool(self.vendors or self.archs or self.families or self.cpu_vendors
                    or self.min_vcpus is not None or self.max_vcpus is not None)

    def where(self) -> tuple[str, dict]:
        """(SQL condition over `n`, bind parameters); 'TRUE' when nothing is asked."""
        parts, params = [], {}
        for column, values in (("vendor", self.vendors), ("architecture", self.archs),
                               ("cpu_family", self.families), ("cpu_vendor", self.cpu_vendors)):
            if values:
                names = [f"{column}_{i}" for i in range(len(values))]
                parts.append(f"lower(n.{column}) IN ({', '.join(':' + k for k in names)})")
                params.update({k: v.strip().lower() for k, v in zip(names, values, strict=True)})
        if self.min_vcpus is not None:
            parts.append("n.n_cpus >= :min_vcpus")
            params["min_vcpus"] = self.min_vcpus
        if self.max_vcpus is not None:
            parts.append("n.n_cpus <= :max_vcpus")
            params["max_vcpus"] = self.max_vcpus
        return (" AND ".join(parts) or "TRUE"), params
