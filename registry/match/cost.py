"""`nodereg match --objective time|cost [--deadline S] [--budget X]`: what a buyer ranks by.

Cost per run = the node's current price per hour (registry.prices) x the predicted time, with the
prediction's interval carried over (price x low, price x high). Ranking by cost needs every ranked
price in one currency: prices in several are refused (one line), since no exchange rate is kept
here; store them converted. Nodes whose predicted time misses the deadline, whose predicted cost
exceeds the budget, or (ranking by cost or with a budget) that have no price, leave the ranking and
are listed with the reason, so that nothing disappears silently.
"""

from __future__ import annotations

from registry.errors import UserError
from registry.match.project import MatchResult

OBJECTIVES = ("time", "cost")


def check_objective(objective: str, deadline_s: float | None, budget: float | None) -> None:
    if objective not in OBJECTIVES:
        raise UserError(f"--objective must be one of {', '.join(OBJECTIVES)}, not {objective!r}")
    if deadline_s is not None and not deadline_s > 0:
        raise UserError(f"--deadline must be a number of seconds > 0, not {deadline_s:g}")
    if budget is not None and not budget >= 0:
        raise UserError(f"--budget must be a cost per run >= 0, not {budget:g}")


def apply_objective(result: MatchResult, prices: dict[str, tuple[float, str]], objective: str = "time",
                    deadline_s: float | None = None, budget: float | None = None) -> None:
    """Price every node of `result`, drop those that miss the deadline or budget (into
    `result.excluded`, with the reason) and rank the rest by `objective`."""
    check_objective(objective, deadline_s, budget)
    for n in result.nodes:
        if n.node in prices:
            per_hour, n.currency = prices[n.node]
            n.cost, n.cost_low, n.cost_high = (per_hour * t / 3600.0 for t in (n.predicted_s, n.low_s, n.high_s))
    by_cost = objective == "cost" or budget is not None
    if by_cost:
        currencies = sorted({n.currency for n in result.nodes if n.currency})
        if len(currencies) > 1:
            example = {c: next(n.node for n in result.nodes if n.currency == c) for c in currencies}
            raise UserError("prices in several currencies cannot be ranked together ("
                            + ", ".join(f"{c} on {node}" for c, node in example.items())
                            + "): store them converted to one currency (`nodereg import prices`) or choose nodes "
                              "with --nodes")
    kept = []
    for n in result.nodes:
        reason = _excluded_because(n, by_cost, deadline_s, budget)
        if reason:
            result.excluded.append({"node": n.node, "reason": reason, "predicted_s": n.predicted_s, "cost": n.cost})
        else:
            kept.append(n)
    if by_cost and not kept and result.nodes:
        raise UserError("no node has both a price and a prediction within the limits: set prices with "
                        "`nodereg nodes set NODE --price-per-hour X` or `nodereg import prices FILE.csv`")
    kept.sort(key=(lambda n: (n.cost, n.predicted_s)) if objective == "cost" else (lambda n: n.predicted_s))
    for i, n in enumerate(kept, 1):
        n.rank = i
    result.nodes, result.objective = kept, objective


def _excluded_because(n, by_cost: bool, deadline_s: float | None, budget: float | None) -> str | None:
    if deadline_s is not None and n.predicted_s > deadline_s:
        return f"predicted {n.predicted_s:.3g} s misses the deadline of {deadline_s:g} s"
    if by_cost and n.cost is None:
        return "no price"
    if budget is not None and n.cost > budget:
        return f"predicted cost {n.cost:.3g} {n.currency} exceeds the budget of {budget:g}"
    return None
