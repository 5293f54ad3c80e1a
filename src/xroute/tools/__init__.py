"""Operator tools built on the library's own routing: `explain` (where does a message go, and
why), `lint` (what in a binding set is wrong or redundant) and `cost` (which topic exchange
costs most to route through).

The function ``explain`` is not re-exported here, so that ``xroute.tools.explain`` stays the
module: ``from xroute.tools.explain import explain``.
"""

from xroute.tools.cost import ExchangeCost, rank_costs
from xroute.tools.explain import Explanation, render_tree
from xroute.tools.findings import Finding, LintReport
from xroute.tools.lint import lint_definitions, lint_topology

__all__ = [
    "ExchangeCost",
    "Explanation",
    "Finding",
    "LintReport",
    "lint_definitions",
    "lint_topology",
    "rank_costs",
    "render_tree",
]
