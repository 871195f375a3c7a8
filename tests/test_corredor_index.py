"""The thesis's similarity index: zones read from the registry, per-feature scores, discards, means."""

import pytest
import sqlalchemy as sa

from registry.db import open_registry
from registry.errors import UserError
from registry.models.corredor.index import Phase, Profile, Stream, compare, pct_diff, queries
from registry.models.corredor.zones import FeatureZones, Zones, load_zones


@pytest.fixture(scope="module")
def registry(tmp_path_factory):
    reg = open_registry(f"duckdb:///{tmp_path_factory.mktemp('corredor') / 'r.duckdb'}")
    yield reg
    reg.close()


@pytest.fixture(scope="module")
def zones(registry):
    with registry.connect() as conn:
        return load_zones(conn)


def kb(size_kb, stride, access, elem_bytes=8):
    return Stream.from_kb(size_kb, stride, elem_bytes, access)


# MM 4000x4000 on BN (Table 3.17): v1 15624/32000/8B/C, v2 3906/8/8B/P, tpi 0.01325 us
MM4000 = Phase("mm", (kb(15624, 32000, "C"), kb(3906, 8, "P")), 0.01325, 212.0254, 16000e6)


def test_seeded_zones_are_table_3_21(zones):
    assert zones.version == 1 and zones.max_index == 125
    size, stride, tpi = zones["size"], zones["stride"], zones["tpi"]
    # size and tpi: <=2: 25, <=5: 15, <=10: 10, <=20: 5, 20-80: 0, >80 discard
    for fz in (size, tpi):
        scores = [fz.score(d) for d in (0, 2, 2.01, 5, 5.01, 10, 10.5, 20, 20.02, 80)]
        assert scores == [25, 25, 15, 15, 10, 10, 5, 5, 0, 0]
        assert not fz.discards(80) and fz.discards(80.01)
    # stride: <=5: 25, <=10: 10, else 0, >80 discard
    assert [stride.score(d) for d in (0, 5, 6.25, 10, 10.1, 79)] == [25, 25, 10, 10, 0, 0]
    assert stride.discards(99.98) and not stride.discards(6.25)
    # categorical: equal 25, different 0, never a discard
    for name in ("dtype", "access"):
        assert (zones[name].score(0), zones[name].score(100), zones[name].discards(100)) == (25, 0, False)


def test_latest_zones_version_is_the_default_and_versions_are_kept(tmp_path):
    reg = open_registry(f"duckdb:///{tmp_path / 'v.duckdb'}")
    with reg.begin() as conn:
        conn.execute(sa.text("INSERT INTO corredor_zones SELECT 2, feature, max_pct / 2, score FROM corredor_zones "
                             "WHERE version = 1"))
        conn.execute(sa.text("INSERT INTO corredor_discards SELECT 2, feature, 40 FROM corredor_discards "
                             "WHERE version = 1"))
    with reg.connect() as conn:
        latest, first = load_zones(conn), load_zones(conn, 1)
        with pytest.raises(UserError, match="version 7"):
            load_zones(conn, 7)
    reg.close()
    assert latest.version == 2 and latest["size"].score(2) == 15 and latest["size"].discards(41)
    assert first["size"].score(2) == 25 and not first["size"].discards(41)


def test_zones_object_is_immutable_and_round_trips(zones):
    with pytest.raises(AttributeError):
        zones.version = 3  # frozen dataclass
    assert Zones.from_dict(zones.to_dict()) == zones
    tight = zones.tightened(0.5)
    assert tight.tightenings == 1 and tight["size"].score(2) == 15 and tight["size"].discards(41)
    assert zones["size"].score(2) == 25  # the original is untouched


def test_zones_must_cover_every_feature():
    with pytest.raises(UserError, match="tpi"):
        Zones(1, (FeatureZones("size", ((2.0, 25.0),)),))


def test_pct_diff_is_relative_to_the_phase_value():
    assert pct_diff(15624, 16264) == pytest.approx(4.0963, abs=1e-4)
    assert pct_diff(8, 32000) == pytest.approx(399900)
    assert pct_diff(0.01325, 0.0) == 100  # mbw1pX's 0.00000 (Table 3.23: 100.00%, discarded)


def test_queries_are_all_2_to_the_n_minus_1_combinations():
    assert queries(2) == [(0,), (1,), (0, 1)]
    q3 = queries(3)
    assert q3 == [(0,), (1,), (2,), (0, 1), (0, 2), (1, 2), (0, 1, 2)]
    assert len(queries(5)) == 2 ** 5 - 1


def test_worked_example_mm4000_q3_vs_mbwXA2hc(zones):
    """Table 3.26: query [v1,v2] vs mbwXA2hc(15617,32000,3124,8): iT 12.5, iS 25, iD 25, iA 12.5, iZ 25 -> 100."""
    prof = Profile("mbwXA2hc", (kb(15617, 32000, "C"), kb(3124, 8, "C")), 0.01312)
    c = compare(MM4000, (0, 1), prof, zones)
    assert c.sub == {"iT": 12.5, "iS": 25, "iD": 25, "iA": 12.5, "iZ": 25}
    assert c.index == 100 and not c.discarded_by
    assert [round(d, 2) for d in c.d_pct["size"]] == [0.04, 20.02]   # as printed in Table 3.26
    assert c.scores["size"] == (25, 0) and c.scores["access"] == (25, 0)


def test_private_variant_scores_97_5(zones):
    prof = Profile("mbwXA2hp", (kb(15617, 32000, "C"), kb(3124, 8, "P")), 0.01229)
    assert compare(MM4000, (0, 1), prof, zones).index == 97.5   # Table 3.26, second candidate


def test_a_discard_in_one_stream_discards_the_profile(zones):
    # mbw2c(15622,8,4024,8): stream 1's stride 8 vs 32000 differs by 99.98% -> discarded (Table 3.26)
    prof = Profile("mbw2c", (kb(15622, 8, "C"), kb(4024, 8, "C")), 0.00618)
    c = compare(MM4000, (0, 1), prof, zones)
    assert c.discarded_by == ("stride",) and c.index is None
    assert c.sub["iT"] == 20 and c.sub["iS"] == 12.5   # sub-indexes still computed, as the thesis prints them


def test_tpi_is_scored_once_and_single_queries_pair_the_right_stream(zones):
    prof = Profile("mbw1hp", (kb(4101, 8, "P"),), 0.00430)
    c = compare(MM4000, (1,), prof, zones)      # q2 = [v2] of Table 3.24: 4.99% -> 15, tpi 67.5% -> 0
    assert c.d_pct["tpi"] == (pytest.approx(67.547, abs=1e-3),) and c.sub["iZ"] == 0
    assert c.index == 15 + 25 + 25 + 25 + 0
    assert compare(MM4000, (0,), prof, zones).discarded_by == ("stride",)   # the same profile against v1
    with pytest.raises(ValueError):
        compare(MM4000, (0, 1), prof, zones)


def test_dtype_compares_the_element_size(zones):
    phase = Phase("p", (kb(100, 8, "C", elem_bytes=4),), 1.0, 1.0)
    same_size = Profile("f32", (Stream(102400, 8, 4, "C", dtype="i32"),), 1.0)
    other = Profile("f64", (Stream(102400, 8, 8, "C"),), 1.0)
    assert compare(phase, (0,), same_size, zones).sub["iD"] == 25
    assert compare(phase, (0,), other, zones).sub["iD"] == 0


def test_bad_streams_are_user_errors():
    with pytest.raises(UserError, match="access"):
        Stream(10, 8, 8, "X")
    with pytest.raises(UserError, match="positive"):
        Stream(0, 8)
    with pytest.raises(UserError, match="no stream"):
        Phase("p", (), 1.0, 1.0)
