"""The Kubeflow Trainer v2 engine, one folder: ``api`` (TrainJob, the training runtimes, the
JobSet template they hold, and the default runtimes as data), ``framework`` (the planner),
``entry`` (its registry record). Importing the package loads none of them."""
