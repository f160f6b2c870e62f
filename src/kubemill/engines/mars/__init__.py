"""The Mars engine, one folder: ``api`` (MarsCluster), ``framework`` (its planner: the
Deployments and services of a cluster), ``local`` (its replicas on one machine), ``entry``
(its registry record) and ``pod`` (the in-pod entrypoint its pods run). Importing the
package loads none of them."""
