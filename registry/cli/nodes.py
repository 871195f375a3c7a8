"""`nodereg nodes`: list, show and remove nodes."""

import json
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from registry.cli.app import app, import_app, remove_confirmed, state
from registry.cli.output import print_json, print_table, say
from registry.errors import UserError
from registry.nodefilter import NodeFilter

if TYPE_CHECKING:
    import sqlalchemy as sa

nodes_app = typer.Typer(help="List, show and remove nodes.", invoke_without_command=True)
app.add_typer(nodes_app, name="nodes")

_LIST_SQL = """
SELECT v.name, v.cpu_model, v.n_cpus, v.cores, v.memory_bytes, v.cpu_list, v.source, v.hosts, v.profiles,
       v.last_profiled, v.memory_triad_gbs, v.{fp64}, v.measured_runs,
       {kind}
FROM v_nodes v JOIN nodes n ON n.name = v.name
WHERE {where}
ORDER BY v.name"""
_KIND = "n.vendor, n.architecture, n.cpu_vendor, n.cpu_family"
_KIND_UNKNOWN = "NULL AS vendor, NULL AS architecture, NULL AS cpu_vendor, NULL AS cpu_family"
_KIND_SCHEMA = 14   # the schema that gave nodes their vendor, architecture and CPU family
FIGURES_DEFINED = ("memory_triad_gbs: STREAM triad at the most threads measured, largest working set; fp64_gflops: "
                   "peak_fma at the most threads measured (each the better configuration there, the median over "
                   "the hosts): the figures profile, match and the reports quote")
_FP64_SCHEMA = 21   # fp64_gflops: peak_fma at the most threads (before: best_fp64_gflops, the best of any count)
_HOSTS_SQL = """
SELECT host, profiles, last_profiled, memory_triad_gbs, {fp64}
FROM v_hosts WHERE node = :name ORDER BY host"""


@nodes_app.callback()
def list_nodes(
    ctx: typer.Context,
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
    vendor: list[str] = typer.Option(None, "--vendor", help="Cloud vendor of imported types (aws, azure, gcp); "
                                                            "repeatable."),
    arch: list[str] = typer.Option(None, "--arch", help="Architecture: x86_64 or aarch64 (arm64); repeatable."),
    family: list[str] = typer.Option(None, "--family", help="CPU family ('Zen 4', 'Graviton3', 'Ice Lake'); "
                                                            "repeatable."),
    cpu_vendor: list[str] = typer.Option(None, "--cpu-vendor", help="CPU maker (AMD, Intel, AWS, Ampere, ...); "
                                                                    "repeatable."),
    min_vcpus: int = typer.Option(None, "--min-vcpus", min=0, help="At least this many vCPUs."),
    max_vcpus: int = typer.Option(None, "--max-vcpus", min=0, help="At most this many vCPUs."),
) -> None:
    """List the registered nodes (types; `hosts`: how many hosts profiled each, whose median the
    figures are), those matching every filter given; with `show` or `rm`: act on one."""
    if ctx.invoked_subcommand is not None:
        return
    chosen = NodeFilter(vendor or [], arch or [], family or [], cpu_vendor or [], min_vcpus, max_vcpus)
    where, params = chosen.where()
    reg = state(ctx).reader()
    known = reg.version >= _KIND_SCHEMA     # an older shared registry is listed as it is (#30)
    if chosen.active and not known:
        from registry.db.upgrade import require_current

        require_current(reg, "nodes with filters")
    fp64 = fp64_column(reg)
    rows = reg.dicts(_LIST_SQL.format(where=where, kind=_KIND if known else _KIND_UNKNOWN, fp64=fp64), params)
    for r in rows:
        mem = r.pop("memory_bytes")
        r["memory_gib"] = round(mem / 2**30, 1) if mem else None
    if as_json:
        print_json(rows)
        return
    columns = ["name", "cpu_model", "n_cpus", "memory_gib", "cpu_list", "hosts", "profiles", "memory_triad_gbs",
               fp64, "measured_runs"]
    if any(r["cpu_family"] or r["architecture"] for r in rows):      # imported types: say what they are
        columns[2:2] = ["architecture", "cpu_family"]
    print_table(rows, columns, empty="no node matches the filters" if chosen.active else
                "no nodes registered yet: run `nodereg profile NODE`")
    if rows and fp64 == "fp64_gflops":
        say(FIGURES_DEFINED)


def fp64_column(reg) -> str:
    """v_nodes' FP64 figure: fp64_gflops, or on an older shared registry (listed as it is, #30) the
    column it has, best_fp64_gflops, under its own name: its figure has another definition."""
    return "fp64_gflops" if reg.version >= _FP64_SCHEMA else "best_fp64_gflops"


def node_details(conn: "sa.Connection", name: str, fp64: str = "fp64_gflops") -> dict:
    import sqlalchemy as sa

    from registry.nodes import require_node_id

    node_id = require_node_id(conn, name)
    node = dict(conn.execute(sa.text("SELECT * FROM nodes WHERE node_id = :id"), {"id": node_id}).one()._mapping)
    inv = node.pop("inventory_json")
    node["inventory"] = json.loads(inv) if inv else None
    node["caches"] = [dict(r._mapping) for r in conn.execute(sa.text(
        "SELECT level, cache_type, size_bytes, line_bytes, shared_by, instances FROM node_caches "
        "WHERE node_id = :id ORDER BY level, cache_type"), {"id": node_id})]
    node["profiles"] = [dict(r._mapping) for r in conn.execute(sa.text(
        "SELECT p.uid, p.host, p.mode, p.started_at, p.duration_s, p.cpu_list, p.compiler, "
        "(SELECT count(*) FROM profile_runs r WHERE r.profile_id = p.profile_id) AS configs "
        "FROM profiles p WHERE p.node_id = :id ORDER BY p.profile_id"), {"id": node_id})]
    node["hosts"] = [dict(r._mapping) for r in conn.execute(sa.text(_HOSTS_SQL.format(fp64=fp64)), {"name": name})]
    node["traces"] = conn.execute(sa.text("SELECT count(*) FROM traces WHERE node_id = :id"), {"id": node_id}).scalar_one()
    node["runs"] = conn.execute(sa.text("SELECT count(*) FROM runs WHERE node_id = :id"), {"id": node_id}).scalar_one()
    return node


@nodes_app.command("show")
def show(ctx: typer.Context, name: str = typer.Argument(..., help="Node name."),
         as_json: bool = typer.Option(False, "--json", help="Print JSON.")) -> None:
    """Show one node: inventory, caches, hosts, profiles, traces and runs."""
    reg = state(ctx).registry(readonly=True)
    with reg.connect() as conn:
        node = node_details(conn, name, fp64_column(reg))
    if as_json:
        print_json(node)
        return
    head = {k: node[k] for k in ("name", "cpu_model", "vendor", "architecture", "cpu_vendor", "cpu_family",
                                 "n_cpus", "cores", "sockets", "threads_per_core",
                                 "numa_nodes", "memory_bytes", "max_mhz", "cpu_list", "host", "kernel",
                                 "compiler", "source", "created_at", "traces", "runs")}
    print_table([{"field": k, "value": v} for k, v in head.items()], ["field", "value"], title=f"node {name}")
    if node["caches"]:
        print_table(node["caches"], title="caches")
    if len(node["hosts"]) > 1:
        print_table(node["hosts"], title="hosts (latest profile of each; `nodereg health` compares them)")
    print_table(node["profiles"], title="profiles", empty="no profiles")


@nodes_app.command("rm")
def rm(ctx: typer.Context, name: str = typer.Argument(..., help="Node name."),
       yes: bool = typer.Option(False, "--yes", "-y", help="Do not ask for confirmation.")) -> None:
    """Remove a node and everything measured on it (profiles, traces, runs, predictions for it). Predictions
    made from it for other nodes stay: they are those nodes' accuracy history."""
    from registry.nodes import predictions_from, remove_node, require_node_id

    with state(ctx).registry(readonly=True).connect() as conn:
        kept = predictions_from(conn, require_node_id(conn, name))
    keeps = f" ({kept} predictions made from it for other nodes stay, for their accuracy history)" if kept else ""
    counts = remove_confirmed(ctx, yes, lambda conn: require_node_id(conn, name), remove_node,
                              f"Remove node {name!r} and everything measured on it{keeps}?",
                              f"refusing to remove node {name!r}")
    detail = ", ".join(f"{n} {t}" for t, n in counts.items() if n and t != "nodes")
    say(f"removed node {name}" + (f" ({detail})" if detail else "") + (f"; kept {kept} predictions made "
        "from it for other nodes" if kept else ""))


@nodes_app.command("set")
def set_node(ctx: typer.Context, name: str = typer.Argument(..., help="Node name."),
             price_per_hour: str = typer.Option(None, "--price-per-hour",
                                                help="What an hour of this node costs (kept with its history)."),
             currency: str = typer.Option("USD", "--currency", help="3-letter currency code of the price."),
             source: str = typer.Option("cli", "--source", help="Where the price comes from."),
             date: str = typer.Option(None, "--date", help="Date the price holds from, YYYY-MM-DD (default: today).")
             ) -> None:
    """Set facts about a node that measurement cannot give: its price per hour."""
    from registry.prices import Price, check_currency, check_date, check_price, store_price

    if price_per_hour is None:
        raise UserError("nothing to set: give --price-per-hour")
    price = Price(name, check_price(price_per_hour), check_currency(currency), source, check_date(date))
    with state(ctx).registry().begin() as conn:
        added = store_price(conn, price)
    say(f"{name}: {price.price_per_hour:g} {price.currency} per hour"
        + ("" if added else " (already stored)"))


def _csv_file(what: str) -> Path:
    return typer.Argument(..., metavar="FILE.csv", help=f"CSV with {what}.")


@import_app.command("prices")
def import_prices(ctx: typer.Context, path: Path = _csv_file("columns node,price_per_hour,currency[,source,date]")
                  ) -> None:
    """Import node prices from a CSV file (all rows or none; history is kept)."""
    from registry.prices import import_prices_csv

    with state(ctx).registry().begin() as conn:
        rows, added = import_prices_csv(conn, path)
    say(f"imported {rows} prices from {path} ({added} new)")


@import_app.command("specs")
def import_specs(ctx: typer.Context, path: Path = _csv_file("column node and any of vcpus, memory_gib, vm_type")
                 ) -> None:
    """Import vCPUs and memory of nodes (cloud VM types: from their type name) from a CSV file (all rows or none)."""
    from registry.specs import import_specs_csv

    with state(ctx).registry().begin() as conn:
        count, created = import_specs_csv(conn, path)
    say(f"set the specs of {count} nodes from {path}" + (f" (new: {', '.join(created)})" if created else ""))


@nodes_app.command("like")
def like(ctx: typer.Context,
         name: str = typer.Argument(None, help="Node (default: the one whose suite profile this host measured last)."),
         suite: str = typer.Option("sparecores", "--suite", help="Suite whose figures are compared."),
         top: int = typer.Option(5, "--top", min=1, help="How many of the most alike nodes to list."),
         figures: str = typer.Option(None, "--figures", help="Compare the figures with this node (default: the "
                                                              "most alike)."),
         as_json: bool = typer.Option(False, "--json", help="Print JSON.")) -> None:
    """The imported node types most like NODE (the same CPU model, then microarchitecture, then the
    nearest figures), and per config how far apart their figures are."""
    from registry.like import like as find_like

    out = find_like(state(ctx).registry(readonly=True), name, suite, top, figures)
    if as_json:
        print_json(out)
        return
    print_table([{"node": r["node"], "match": r["match"], "cpu_family": r["cpu_family"], "n_cpus": r["n_cpus"],
                  "configs": r["shared_configs"], "median_diff": f"{r['median_abs_diff']:.0%}",
                  "rms_log": r["rms_log"]} for r in out["like"]],
                title=f"nodes most like {out['node']} ({out['cpu_family'] or out['cpu_model']}, "
                      f"{out['n_cpus']} CPUs) in suite {out['suite']}")
    print_table([{"config": f["config"], "unit": f["unit"], "here": f["here"], "there": f["there"],
                  "there/here": f"{f['diff']:+.0%}"} for f in out["figures"]],
                title=f"{out['node']} against {out['figures_of']}: per figure")
