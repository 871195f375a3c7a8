"""VM type names of the major clouds -> vCPUs and memory (registry/io/vmtypes.py), table-driven."""

import pytest

from registry.io.vmtypes import vm_shape


@pytest.mark.parametrize("name, vcpus, gib, convention", [
    # Alibaba (Lumos): family letter c 1:2, g 1:4, r 1:8; hf variants; burstable ratio in the name
    ("g6.xlarge", 4, 16, "alibaba/aws"), ("ecs.g6.xlarge", 4, 16, "alibaba/aws"), ("c6.large", 2, 4, "alibaba/aws"),
    ("r6.2xlarge", 8, 64, "alibaba/aws"), ("hfc6.2xlarge", 8, 16, "alibaba/aws"), ("hfr6.large", 2, 16, "alibaba/aws"),
    ("g6.4xlarge", 16, 64, "alibaba/aws"), ("ecs.t5-lc1m2.small", 1, 2, "alibaba/aws"),
    # Huawei (Lumos): the third part is GiB per vCPU
    ("s6.xlarge.2", 4, 8, "huawei"), ("m6.large.8", 2, 16, "huawei"), ("c6.2xlarge.4", 8, 32, "huawei"),
    ("s6.small.1", 1, 1, "huawei"),
    # AWS: generation and attributes after the letter; burstable t sizes
    ("m5.xlarge", 4, 16, "alibaba/aws"), ("c5.large", 2, 4, "alibaba/aws"), ("r5d.4xlarge", 16, 128, "alibaba/aws"),
    ("m6i.24xlarge", 96, 384, "alibaba/aws"), ("c6gn.16xlarge", 64, 128, "alibaba/aws"),
    ("x1e.xlarge", 4, 64, "alibaba/aws"), ("t3.micro", 2, 1, "alibaba/aws"), ("t3.large", 2, 8, "alibaba/aws"),
    ("i3.2xlarge", 8, 64, "alibaba/aws"),
    # Tencent: size word -> vCPUs, trailing number = GiB
    ("S5.LARGE8", 4, 8, "tencent"), ("S5.MEDIUM4", 2, 4, "tencent"), ("SA2.2XLARGE16", 8, 16, "tencent"),
    ("S5.SMALL1", 1, 1, "tencent"), ("M5.4XLARGE64", 16, 64, "tencent"),
    # Azure: vCPUs in the name, memory per vCPU by family and version
    ("Standard_D4s_v5", 4, 16, "azure"), ("Standard_E16-4s_v5", 16, 128, "azure"), ("Standard_F8s_v2", 8, 16, "azure"),
    ("Standard_D4as_v4", 4, 16, "azure"), ("Standard_L8s_v3", 8, 64, "azure"),
    # GCP: series-type-vCPUs; n1's own ratios; custom; shared core
    ("n2-standard-8", 8, 32, "gcp"), ("e2-highmem-4", 4, 32, "gcp"), ("c2d-highcpu-16", 16, 16, "gcp"),
    ("n1-standard-4", 4, 15, "gcp"), ("n2-custom-8-16384", 8, 16, "gcp"), ("e2-medium", 2, 4, "gcp"),
])
def test_vm_shape_from_type_names(name, vcpus, gib, convention):
    shape = vm_shape(name)
    assert (shape.vcpus, shape.convention) == (vcpus, convention)
    assert shape.memory_bytes == int(gib * 2**30)


@pytest.mark.parametrize("name, vcpus", [
    ("ic5.xlarge", 4), ("p3.2xlarge", 8),                 # family memory ratio unknown
    ("Standard_D2_v2", 2), ("Standard_B2ms", 2),          # older D (1:3.5) and burstable B: not by family
])
def test_vm_shape_where_the_name_says_vcpus_only(name, vcpus):
    shape = vm_shape(name)
    assert shape.vcpus == vcpus and shape.understood
    assert shape.memory_bytes is None


@pytest.mark.parametrize("name", ["weird", "x.huge", "m5.metal", "g6.0xlarge", "S5.3LARGE8", "n2-standard",
                                  "Standard_", f"m5.{2**20}xlarge", ""])
def test_names_not_understood(name):
    shape = vm_shape(name)
    assert not shape.understood and shape.memory_bytes is None and shape.convention is None
