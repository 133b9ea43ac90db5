"""The joint sandbox packing as an integer program, solved by HiGHS (a dev dependency): the oracle the
packer is held to in tests/unit/test_harvest_packing.py and the optimum bench/packing.py reports.

Variables x[j][n] (pods of job j on node n) and z[n] (node n hosts sandbox pods after the pass):
    maximize   (N + 1) * sum x  -  sum z          (the most pods, then the fewest nodes hosting them)
    subject to sum_n x[j][n] <= pending_j
               sum_j x[j][n] * request_j[k] <= free_n[k]                    every resource k
               harvest_n + sum_j x[j][n] * cpu_j <= cap_j(n)  if x[j][n] > 0  (big-M on a binary y[j][n])
               x[j][n] <= pending_j * z[n];  z[n] = 1 where sandbox pods run already
With `relax`, the LP relaxation with every cap at its loosest (an upper bound on pods, for big clusters).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import highspy

Kind = tuple[int, Mapping[str, float], Mapping[str, float]]  # (pending pods, request, cap by allowed node)


def solve(
    kinds: Sequence[Kind],
    free: Mapping[str, Mapping[str, float]],
    harvest: Mapping[str, float],
    relax: bool = False,
) -> tuple[float, int]:
    """(most pods, fewest nodes hosting sandbox pods at that count); `relax`: the LP bound on pods."""
    h = highspy.Highs()  # type: ignore[no-untyped-call]
    h.setOptionValue("output_flag", False)
    h.setOptionValue("mip_rel_gap", 0.0)
    nodes = sorted(free)
    add = h.addVariable if relax else h.addIntegral
    x = {(j, n): add(lb=0, ub=k if n in caps else 0) for j, (k, _, caps) in enumerate(kinds) for n in nodes}
    z = {n: h.addVariable(lb=0, ub=1) if relax else h.addBinary() for n in nodes}
    for j, (k, _, _) in enumerate(kinds):
        h.addConstr(sum(x[j, n] for n in nodes) <= k)
    resources = {r for _, req, _ in kinds for r in req}
    for n in nodes:
        for r in resources:
            used = sum(x[j, n] * req.get(r, 0.0) for j, (_, req, _) in enumerate(kinds))
            h.addConstr(used <= free[n].get(r, 0.0) + 1e-9)
        cpu = sum(x[j, n] * req.get("cpu", 0.0) for j, (_, req, _) in enumerate(kinds))
        here = harvest.get(n, 0.0)
        caps = [(j, k, c[n]) for j, (k, _, c) in enumerate(kinds) if n in c and k > 0]
        if relax and caps:
            h.addConstr(here + cpu <= max(cap for _, _, cap in caps) + 1e-9)
        for j, k, cap in [] if relax else caps:
            big = here + sum(kk * rr.get("cpu", 0.0) for kk, rr, _ in kinds) + abs(cap) + 1
            y = h.addBinary()
            h.addConstr(x[j, n] <= k * y)
            h.addConstr(here + cpu <= cap + 1e-9 + big * (1 - y))
        for j, k, _ in caps:
            h.addConstr(x[j, n] <= k * z[n])
        if here > 1e-9:
            h.addConstr(z[n] >= 1)
    h.maximize((len(nodes) + 1) * sum(x.values()) - sum(z.values()))
    count = sum(h.val(v) for v in x.values())
    if relax:
        return count, 0
    placed = {n for (_, n), v in x.items() if round(h.val(v)) > 0}
    return round(count), sum(1 for n in placed if harvest.get(n, 0.0) <= 1e-9)
