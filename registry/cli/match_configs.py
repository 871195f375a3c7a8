"""`nodereg match APP --configs`: the recommended ranks x threads per node, printed (registry.match.configs)."""

from registry.cli.output import print_json, print_table, say


def print_configs(inputs, model: str, options: dict, as_json: bool) -> None:
    from registry.match.configs import recommend

    choices = sorted(recommend(inputs, model, options), key=lambda c: c.predicted_s)
    if as_json:
        print_json({"app": inputs.found.trace.name, "base": inputs.base, "model": model,
                    "comm_model": inputs.comm.model, "traced_ranks": inputs.comm.traced_ranks,
                    "configs": [c.to_dict() for c in choices]})
        return
    rows = [{"node": c.node, "ranks": c.ranks, "threads": c.threads, "predicted_s": c.predicted_s,
             "comm_s": c.comm_s, "E_index": c.e_index} for c in choices]
    print_table(rows, title=f"{inputs.found.trace.name}: ranks x threads per node (traced at "
                            f"{inputs.comm.traced_ranks} ranks on {inputs.base}; {inputs.comm.model} communication)")
    for c in choices:
        say(f"  {c.node}: {c.ranks} x {c.threads}: " + "; ".join(c.reasons))
