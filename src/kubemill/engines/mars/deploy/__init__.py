"""Mars clusters a program starts for itself, as Mars's ``new_cluster`` does: the engine's
side of :mod:`kubemill.deploy`. ``cluster`` holds what both substrates' ``new_cluster``
share (the arguments read through the cluster's model, the handle they return with its Mars
session); ``kubernetes`` the seed's ``new_cluster`` on a cluster with no operator, which
``kubemill.deploy.kubernetes`` serves at the path the seed imports. The local one runs the
cluster as a job of the local substrate, through the SDK, so it lives in
``kubemill.deploy.local``, above the SDK. Importing the package loads none of them."""
