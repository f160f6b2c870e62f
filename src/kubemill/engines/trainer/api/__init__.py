"""Kubeflow Trainer v2's API (``trainer.kubeflow.org/v1alpha1``): ``jobset`` (the JobSet
template a runtime holds, with what kubemill does not realise refused), ``runtime``
(TrainingRuntime, ClusterTrainingRuntime, their ML and PodGroup policies, and loading one
with field paths), ``policies`` (the port and env names each ML policy kubemill plans
owns), ``steps`` (a runtime's replicated jobs as the steps kubemill realises, their start
order and what is refused), ``defaults`` (the runtimes upstream ships, as data), ``runtimes`` (the
cluster-less registry a TrainJob's ``runtimeRef`` is resolved against), ``patches`` (the
TrainJob's ``runtimePatches`` and applying them), ``spec`` (the TrainJob's spec and status
models), ``trainjob`` (the TrainJob and what it stands for once its runtime
is resolved) and ``kind`` (its ``KindApi``). Importing this package loads none
of them."""
