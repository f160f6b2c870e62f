"""One folder per engine: everything of a kind lives in ``kubemill/engines/<engine>/``.

An engine folder holds, in layers (bottom up, import-linter checks them, see
``[tool.importlinter]`` in pyproject.toml):

- ``api``: the kind's typed models, versions, conversions and ``KindApi`` (pure);
- ``framework``: the planner that turns a job into a Plan, and the kind's status extension
  (pure);
- ``local``: what the engine needs on the local substrate (:class:`LocalSupport`'s
  ``env``/``adapt``/``replan``/``refusals``; pure);
- ``entry``: the engine's registry record (:class:`~kubemill.engines.base.Engine` or
  :class:`~kubemill.engines.base.Controller`: grants, local support, lifecycle, summary),
  the one thing :mod:`kubemill.kinds.registry` names (pure);
- its in-pod programs (``pod``: a Mars pod's entrypoint; ``agent``: MPI's exec agent,
  standalone and delivered as a file), run inside a job's containers; the engine's other
  layers never import them.

This package sits between :mod:`kubemill.kinds` (the registry, which lists the entries) and
:mod:`kubemill.core`; :mod:`kubemill.engines.base` holds the record types. Importing a
package here loads nothing else (the Spark fast path imports single modules).
"""
