"""The operator's RBAC as data: every permission it may get, why, and when it is granted.

:data:`COMMON_RULES` and the registered engines' grants make :func:`all_rules`;
:func:`operator_rules` picks those that apply to one installation. The operator's own
tests check the API calls it makes against the same list (:func:`permits`), so a
permission is added here or the call fails.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from kubemill.api import GROUP
from kubemill.kinds import Controller, OperatorGrant, controllers, engine_for, engines
from kubemill.substrates.kubernetes.build import GangScheduler, gang_scheduler

Scope = Literal["namespace", "cluster", "own-namespace"]
"""Where a rule is granted: in each watched namespace (or cluster-wide when all are
watched), only cluster-wide (cluster-scoped resources), or in the operator's namespace."""
Condition = Literal["always", "gang", "upstream", "clusterwide", "history", "progress"]


@dataclass(frozen=True)
class Rule:
    """One RBAC rule, with why the operator needs it and when it is granted."""

    api_groups: tuple[str, ...]
    resources: tuple[str, ...]
    verbs: tuple[str, ...]
    why: str
    scope: Scope = "namespace"
    when: Condition = "always"

    def to_wire(self) -> dict[str, Any]:
        return {
            "apiGroups": list(self.api_groups),
            "resources": list(self.resources),
            "verbs": list(self.verbs),
        }

    def allows(self, *, group: str, resource: str, verb: str) -> bool:
        """Whether this rule permits ``verb`` on ``resource`` (``pods``, ``tfjobs/status``)."""
        return group in self.api_groups and resource in self.resources and verb in self.verbs


COMMON_RULES: tuple[Rule, ...] = (
    Rule(
        ("",),
        ("pods",),
        ("list", "watch", "create", "delete"),
        "one pod per replica: watched as the informer cache, created, deleted to restart",
    ),
    Rule(
        ("",),
        ("services",),
        ("list", "watch", "create", "delete"),
        "one headless service per replica",
    ),
    Rule(("",), ("events",), ("create",), "a Kubernetes Event on the job for every decision"),
    Rule(
        ("coordination.k8s.io",),
        ("leases",),
        ("get", "create", "update"),
        "leader election between operator replicas (one Lease in the operator's namespace)",
        scope="own-namespace",
    ),
)
"""What the operator needs whatever kinds it runs."""

HISTORY_RULES: tuple[Rule, ...] = (
    Rule(
        ("",),
        ("configmaps",),
        ("list", "create", "delete"),
        "records of deleted jobs (--history): one ConfigMap each in the operator's namespace, "
        "listed once at start, the oldest deleted beyond the count kept",
        scope="own-namespace",
        when="history",
    ),
)
"""Granted when the operator keeps a history (``kubemill install --history N``, N > 0).
Kept apart from the engines' grants, which are merged by resource whatever their scope:
this rule must stay in the operator's own namespace."""

PROGRESS_RULES: tuple[Rule, ...] = (
    Rule(
        ("authentication.k8s.io",),
        ("tokenreviews",),
        ("create",),
        "job pods' progress reports: the API server says which pod a report's token is bound "
        "to (the job's own service account needs no permission)",
        scope="cluster",
        when="progress",
    ),
)
"""Granted when job pods report progress to the operator's endpoint (``kubemill install``'s
default; ``--no-progress`` leaves it out). TokenReviews are cluster-scoped: a namespaced
install gets this one rule in a ClusterRole of its own."""


def all_rules() -> tuple[Rule, ...]:
    """Every permission the operator can be granted, derived from the registered kinds.

    The job resources of every kind (and, with ``--serve-upstream-groups``, of their upstream
    groups), the common rules, and what each kind's engine says it needs
    (:class:`kubemill.kinds.OperatorGrant`), merged per resource. PodGroup rules depend on
    the scheduler: see :func:`pod_group_rule`.
    """
    kinds = engines()
    jobs = tuple(engine.api.plural for engine in kinds)
    controlling = controllers()
    controls = tuple(c.api.plural for c in controlling)
    status = tuple(f"{plural}/status" for plural in (*jobs, *controls))
    ending = tuple(engine.api.plural for engine in kinds if engine.finishes and engine.expires)
    services = tuple(engine.api.plural for engine in kinds if not engine.finishes)
    lasting = tuple(engine.api.plural for engine in kinds if engine.finishes and not engine.expires)
    rules = [
        Rule(
            (GROUP,),
            ending,
            ("list", "watch", "delete"),
            "watch jobs (kopf); delete a job whose ttlSecondsAfterFinished has passed",
        ),
    ]
    if services or controls or lasting:
        # A service never finishes, and a schedule or a kind without a TTL never expires:
        # nothing ever deletes them.
        rules.append(
            Rule(
                (GROUP,),
                (*lasting, *services, *controls),
                ("list", "watch"),
                "watch services, jobs without a TTL, and the kinds that create jobs of "
                "another kind (kopf)",
            )
        )
    rules.append(
        Rule((GROUP,), status, ("patch",), "write job status through the status subresource")
    )
    rules += _controlled_rules(controlling, GROUP, when="always")
    upstream: dict[str, list[str]] = {}
    restarting: set[str] = {engine.api.plural for engine in kinds if engine.restarts}
    expiring: set[str] = {
        engine.api.plural for engine in kinds if engine.finishes and engine.expires
    }
    for engine in kinds:
        for group, _ in engine.api.upstream_groups:
            upstream.setdefault(group, []).append(engine.api.plural)
    upstream_controls: dict[str, list[Controller]] = {}
    for controller in controlling:
        for group, _ in controller.api.upstream_groups:
            upstream_controls.setdefault(group, []).append(controller)
            upstream.setdefault(group, [])
    for group, plurals in upstream.items():
        # A kind whose pods never restart has no restart counts to annotate, and one
        # without a TTL is never deleted.
        for patching, deleting in ((True, True), (True, False), (False, True), (False, False)):
            chosen = tuple(
                p for p in plurals if (p in restarting) == patching and (p in expiring) == deleting
            )
            if not chosen:
                continue
            why = f"--serve-upstream-groups: the same for {group} jobs"
            if patching:
                why += (
                    ", and patch their kubemill.dev/restarts annotation (upstream status "
                    "schemas have no restart counts)"
                )
            verbs = ("list", "watch", *(("patch",) if patching else ()))
            rules.append(
                Rule(
                    (group,),
                    chosen,
                    (*verbs, *(("delete",) if deleting else ())),
                    why,
                    when="upstream",
                )
            )
        mine = upstream_controls.get(group, [])
        if mine:
            rules.append(
                Rule(
                    (group,),
                    tuple(c.api.plural for c in mine),
                    ("list", "watch"),
                    f"--serve-upstream-groups: the same for {group} "
                    + ", ".join(c.kind for c in mine),
                    when="upstream",
                )
            )
            rules += _controlled_rules(mine, group, when="upstream")
        plurals = [*plurals, *(c.api.plural for c in mine)]
        rules.append(
            Rule(
                (group,),
                tuple(f"{p}/status" for p in plurals),
                ("patch",),
                f"--serve-upstream-groups: status of {group} jobs",
                when="upstream",
            )
        )
    rules += COMMON_RULES
    merged = _merge_grants(_merged(rules), [g for engine in kinds for g in engine.grants])
    return (*merged, *HISTORY_RULES, *PROGRESS_RULES)


def _merged(rules: Sequence[Rule]) -> list[Rule]:
    """One rule per (groups, resources, scope, condition): verbs and reasons joined (a
    controller's create joins the jobs' list, watch and delete of the same resource)."""
    out: list[Rule] = []
    for rule in rules:
        key = (rule.api_groups, rule.resources, rule.scope, rule.when)
        at = next(
            (i for i, r in enumerate(out) if (r.api_groups, r.resources, r.scope, r.when) == key),
            None,
        )
        if at is None:
            out.append(rule)
            continue
        old = out[at]
        verbs = tuple(dict.fromkeys((*old.verbs, *rule.verbs)))
        out[at] = Rule(
            old.api_groups, old.resources, verbs, f"{old.why}; {rule.why}", old.scope, old.when
        )
    return out


def _controlled_rules(
    controlling: Sequence[Controller], group: str, *, when: Condition
) -> list[Rule]:
    """Creating the jobs that controllers make, in ``group`` (their delete is the jobs')."""
    created: dict[str, list[str]] = {}
    for controller in controlling:
        plural = engine_for(controller.controls).api.plural
        created.setdefault(plural, []).append(controller.kind)
    return [
        Rule(
            (group,),
            (plural,),
            ("create",),
            f"a {' or '.join(kinds)} creates its runs (and deletes them past its history "
            "limits, or to replace one, with the jobs' delete)",
            when=when,
        )
        for plural, kinds in created.items()
    ]


def _merge_grants(rules: list[Rule], grants: Sequence[OperatorGrant]) -> list[Rule]:
    """Add the engines' grants; one rule per (groups, resources), verbs and reasons joined."""
    out = list(rules)
    for grant in grants:
        key = (grant.api_groups, grant.resources)
        at = next((i for i, r in enumerate(out) if (r.api_groups, r.resources) == key), None)
        if at is None:
            out.append(Rule(grant.api_groups, grant.resources, grant.verbs, grant.why))
            continue
        rule = out[at]
        verbs = tuple(dict.fromkeys((*rule.verbs, *grant.verbs)))
        why = rule.why if grant.why in rule.why else f"{rule.why}; {grant.why}"
        out[at] = Rule(rule.api_groups, rule.resources, verbs, why, rule.scope, rule.when)
    return out


def pod_group_rule(gang: GangScheduler) -> Rule:
    """The PodGroup permission for one gang scheduler's API group."""
    return Rule(
        (gang.api_group,),
        (gang.plural,),
        ("list", "watch", "create", "delete"),
        f"gang scheduling with {gang.scheduler_name}: one PodGroup per job, its phase watched",
        when="gang",
    )


def operator_rules(
    *,
    gang_scheduler: str | GangScheduler | None = None,
    serve_upstream_groups: bool = False,
    clusterwide: bool = True,
    history: bool = True,
    progress: bool = True,
) -> list[Rule]:
    """The rules that apply to one installation (all scopes); ``history``: the operator
    keeps records of deleted jobs; ``progress``: job pods report progress to it."""
    gang = _gang(gang_scheduler)
    rules = list(all_rules()) + ([pod_group_rule(gang)] if gang is not None else [])
    granted = {"always"}
    if gang is not None:
        granted.add("gang")
    if serve_upstream_groups:
        granted.add("upstream")
    if clusterwide:
        granted.add("clusterwide")
    if history:
        granted.add("history")
    if progress:
        granted.add("progress")
    return [r for r in rules if r.when in granted]


def permits(rules: Sequence[Rule], *, group: str, resource: str, verb: str) -> bool:
    """Whether any of ``rules`` allows ``verb`` on ``resource`` of API ``group``.

    ``resource`` names a subresource as ``pods/log`` or ``tfjobs/status``; the core group
    is ``""``. For tests that check each API call the operator makes against the RBAC.
    """
    return any(r.allows(group=group, resource=resource, verb=verb) for r in rules)


def _gang(value: str | GangScheduler | None) -> GangScheduler | None:
    return gang_scheduler(value)
