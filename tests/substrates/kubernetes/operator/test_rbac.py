"""The install RBAC against what the operator really does, over the whole operator suite.

Each operator process is checked on exit (see ``running_operator``): every request it made
is allowed by the rules ``kubemill install`` grants for its flags. This module adds the
converse over every request of the suite: nothing is granted that no test ever used. The
conftest runs it last.
"""

from __future__ import annotations

import pytest

from kubemill.kinds import engines
from kubemill.substrates.kubernetes.install import operator_rules
from support.operator_support import ALL_OPERATOR_CALLS, resource_calls

SUITE = (
    "test_lifecycle",
    "test_resilience",
    "test_modes",
    "test_mpi_operator",
    "test_spark_operator",
    "test_spark_scheduled",
    "test_mars_operator",
    "test_history",
    "test_progress",
    "test_child_controllers",
    # Engines' own operator tests: the only users of some grants (a RayJob's and a
    # TrainJob's patches, the training runtimes' list and watch).
    "test_rayjob_operator",
    "test_trainjob_operator",
)


def test_every_permission_the_install_grants_is_used_by_the_operator(
    request: pytest.FixtureRequest,
) -> None:
    ran = {item.module.__name__ for item in request.session.items}
    if not set(SUITE) <= ran:
        pytest.skip(f"needs the whole operator suite in one run ({', '.join(SUITE)})")
    assert ALL_OPERATOR_CALLS, "the operator suite recorded no calls"
    used = {
        (c.group or "", c.resource, verb)
        for c in resource_calls(ALL_OPERATOR_CALLS)
        for verb in c.verbs_checked
    }
    # The broadest installation the suite exercises: volcano, upstream groups, cluster-wide.
    rules = operator_rules(gang_scheduler="volcano", serve_upstream_groups=True, clusterwide=True)
    # Held only to be granted on in per-job Roles (RBAC's escalation check), never used.
    delegated = {
        (group, resource, verb)
        for engine in engines()
        for grant in engine.grants
        if grant.delegated
        for group in grant.api_groups
        for resource in grant.resources
        for verb in grant.verbs
    }
    unused = sorted(
        f"{verb} {group or 'core'}/{resource}"
        for rule in rules
        for group in rule.api_groups
        for resource in rule.resources
        for verb in rule.verbs
        if (group, resource, verb) not in used | delegated
    )
    assert not unused, f"granted but never used by the operator: {unused}"
