"""Winner selection: highest index, deterministic tie-breaks, the 'more than five candidates' rule."""

import pytest

from registry.db import open_registry
from registry.models.corredor.index import Phase, Profile, Stream
from registry.models.corredor.select import SelectionRules, match_phase
from registry.models.corredor.zones import load_zones

PHASE = Phase("p", (Stream.from_kb(1000, 8, 8, "C"),), 1.0, 10.0, 10e6)


@pytest.fixture(scope="module")
def zones(tmp_path_factory):
    reg = open_registry(f"duckdb:///{tmp_path_factory.mktemp('sel') / 'r.duckdb'}")
    with reg.connect() as conn:
        z = load_zones(conn)
    reg.close()
    return z


def one(name, size_kb, tpi, stride=8, access="C"):
    return Profile(name, (Stream.from_kb(size_kb, stride, 8, access),), tpi)


def test_highest_index_wins(zones):
    m = match_phase(PHASE, [one("far", 1100, 1.0), one("near", 1010, 1.0), one("private", 1000, 1.0, access="P")],
                    zones)
    assert (m.winner.profile.config, m.index) == ("near", 125)
    assert [c.profile.config for c in m.candidates] == ["near"]     # 'far' (110) is not within 5 points


def test_ties_break_on_tpi_difference_whatever_the_input_order(zones):
    a, b = one("a", 1000, 1.10), one("b", 1000, 0.91)       # both 25+25+25+25+10 = 110
    for profiles in ([a, b], [b, a]):
        m = match_phase(PHASE, profiles, zones)
        assert (m.winner.profile.config, m.index) == ("b", 110)   # tpi d% 9 < 10
        assert any("tie" in n for n in m.notes)


def test_ties_prefer_the_query_covering_more_streams_then_the_name(zones):
    phase = Phase("two", (Stream.from_kb(1000, 8, 8, "C"), Stream.from_kb(500, 8, 8, "P")), 1.0, 1.0)
    single = one("single", 1000, 1.0)
    pair = Profile("pair", (Stream.from_kb(1000, 8, 8, "C"), Stream.from_kb(500, 8, 8, "P")), 1.0)
    m = match_phase(phase, [single, pair], zones)
    assert m.winner.profile.config == "pair" and m.winner.query == (0, 1) and m.index == 125
    twins = [one("zeta", 1000, 1.0), one("alpha", 1000, 1.0)]
    assert match_phase(PHASE, twins, zones).winner.profile.config == "alpha"


def test_more_than_five_close_candidates_tighten_the_margins(zones):
    # seven configs all at 125 with the seeded zones (size d% 0.2 .. 1.8, tpi d% 0.5)
    sizes = [1002, 1004, 1006, 1012, 1014, 1016, 1018]
    profiles = [one(f"c{s}", s, 1.005) for s in sizes]
    loose = match_phase(PHASE, profiles, zones, SelectionRules(max_candidates=10))
    assert loose.zones.tightenings == 0 and len(loose.candidates) == 7
    m = match_phase(PHASE, profiles, zones, SelectionRules(max_candidates=5))
    # margins halved once: size <=1% still 25, 1.2-1.8% now 15 -> three close candidates remain
    assert m.zones.tightenings == 1 and m.zones["size"].zones[0] == (1.0, 25.0)
    assert [c.profile.config for c in m.candidates] == ["c1002", "c1004", "c1006"]
    assert m.winner.profile.config == "c1002" and m.index == 125
    assert any("margins x0.5" in n for n in m.notes)


def test_tightening_that_would_discard_everything_is_not_taken(zones):
    # seven configs 50-75% larger: score 0 on size but not discarded (<= 80%); halving discards them all
    profiles = [one(f"big{k}", 1000 * (1.5 + k * 0.04), 1.0) for k in range(7)]
    m = match_phase(PHASE, profiles, zones)
    assert m.zones.tightenings == 0 and len(m.candidates) == 7
    assert m.winner.profile.config == "big0" and m.index == 100
    assert any("discard all" in n for n in m.notes)


def test_no_similar_profile_means_no_winner(zones):
    m = match_phase(PHASE, [one("huge", 5000, 1.0), one("slow", 1000, 3.0), one("strided", 1000, 1.0, stride=64)],
                    zones)
    assert m.winner is None and m.index is None and m.candidates == ()
    assert all(c.index is None for c in m.comparisons) and len(m.comparisons) == 3
