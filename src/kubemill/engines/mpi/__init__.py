"""The MPI engine, one folder: ``api`` (MPIJob), ``framework`` (its planner), ``local``
(running it on one machine), ``entry`` (its registry record) and ``agent`` (``kubexec``,
the exec agent delivered into the launcher's pod, standalone). Importing the package loads
none of them."""
