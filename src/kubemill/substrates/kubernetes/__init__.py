"""The Kubernetes substrate: the operator, manifests and the client side for a real cluster."""
