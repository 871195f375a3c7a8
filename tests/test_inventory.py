"""Inventory from a synthetic sysfs/procfs tree (2 sockets x 2 cores x 2 threads) and from this machine."""

from registry import cpulist, inventory


def _write(path, text):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def fake_root(tmp_path):
    sysdir = tmp_path / "sys/devices/system"
    _write(sysdir / "cpu/online", "0-7\n")
    for cpu in range(8):
        socket, core, thread = cpu // 4, (cpu % 4) // 2, cpu % 2
        topo = sysdir / f"cpu/cpu{cpu}/topology"
        _write(topo / "physical_package_id", f"{socket}\n")
        _write(topo / "core_id", f"{core}\n")
        first = cpu - thread
        _write(topo / "thread_siblings_list", f"{first}-{first + 1}\n")
        caches = [(1, "Data", "32K", f"{first}-{first + 1}"), (1, "Instruction", "32K", f"{first}-{first + 1}"),
                  (2, "Unified", "1024K", f"{first}-{first + 1}"), (3, "Unified", "16384K", f"{socket * 4}-{socket * 4 + 3}")]
        for i, (level, ctype, size, shared) in enumerate(caches):
            d = sysdir / f"cpu/cpu{cpu}/cache/index{i}"
            for name, value in (("level", level), ("type", ctype), ("size", size), ("shared_cpu_list", shared),
                                ("coherency_line_size", 64)):
                _write(d / name, f"{value}\n")
        _write(sysdir / f"cpu/cpu{cpu}/cpufreq/cpuinfo_max_freq", "3500000\n")
    _write(sysdir / "node/node0/cpulist", "0-3\n")
    _write(sysdir / "node/node1/cpulist", "4-7\n")
    _write(tmp_path / "proc/cpuinfo", "processor\t: 0\nmodel name\t: Fake Xeon  9999\nflags\t\t: sse2 avx avx2 fma\n")
    _write(tmp_path / "proc/meminfo", "MemTotal:       65536000 kB\n")
    return tmp_path


def test_whole_fake_machine(tmp_path):
    inv = inventory.collect(root=fake_root(tmp_path))
    assert (inv.cpu_model, inv.cpu_count, inv.sockets, inv.cores, inv.threads_per_core, inv.numa_nodes) == \
        ("Fake Xeon 9999", 8, 2, 4, 2, 2)
    assert inv.memory_bytes == 65536000 * 1024 and inv.max_mhz == 3500.0
    l3 = inv.last_level_cache()
    assert (l3.level, l3.size_bytes, l3.shared_by, l3.instances) == (3, 16 * 2**20, 4, 2)
    l1 = inv.data_caches()[0]
    assert (l1.size_bytes, l1.shared_by, l1.instances) == (32768, 2, 4)
    assert inv.isa_flags == ["sse2", "avx", "avx2", "fma"] and not inv.restricted


def test_restricted_configuration_counts_only_its_cpus(tmp_path):
    inv = inventory.collect([0, 4], root=fake_root(tmp_path))
    assert (inv.cpu_count, inv.sockets, inv.cores, inv.threads_per_core, inv.numa_nodes) == (2, 2, 2, 1, 2)
    assert inv.restricted and inv.cpu_list == "0,4"
    l3 = inv.last_level_cache()
    assert (l3.shared_by, l3.instances) == (1, 2)


def test_this_machine_and_round_trip():
    inv = inventory.collect()
    assert inv.cpu_count == len(inv.cpus) >= 1 and inv.caches
    assert inventory.Inventory.from_dict(inv.to_dict()) == inv


def test_cpulist_parse_and_format():
    assert cpulist.parse("0-2,5, 7") == [0, 1, 2, 5, 7]
    assert cpulist.format([7, 0, 1, 2, 5]) == "0-2,5,7"
    assert cpulist.format([3]) == "3"
