"""Ray's authentication of a cluster, KubeRay's ``authOptions`` (a RayCluster's spec, and
a RayJob's ``rayClusterSpec``): ``mode: token`` (the default once ``authOptions`` is given)
or ``disabled``, and the token Secret's name and key as KubeRay makes them. KubeRay's later
``secretName`` (a token Secret of the user's) and ``enableK8sTokenAuth`` are refused at
their paths.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator

from kubemill.api.base import KubeModel, refused


class AuthOptions(KubeModel):
    """Ray's authentication of the cluster (KubeRay's ``authOptions``)."""

    mode: Literal["disabled", "token"] = "token"
    """``token``: every Ray node, the submitter and the operator's own requests use a
    token the operator generates into a Secret named after the cluster (key
    :data:`TOKEN_KEY`); ``disabled``: none. KubeRay's default once ``authOptions`` is
    given is ``token``."""
    secret_name: str | None = None
    enable_k8s_token_auth: bool | None = Field(default=None, alias="enableK8sTokenAuth")

    @field_validator("secret_name")
    @classmethod
    def _own_secret(cls, value: str | None) -> str | None:
        if value is not None:
            raise refused(
                "a token Secret of your own is not supported yet: kubemill generates the "
                "cluster's token",
                "remove secretName (the generated Secret is named after the cluster)",
            )
        return value

    @field_validator("enable_k8s_token_auth")
    @classmethod
    def _k8s_tokens(cls, value: bool | None) -> bool | None:
        if value:
            raise refused(
                "Ray's authentication by Kubernetes service account tokens is not supported yet",
                "remove enableK8sTokenAuth (mode: token uses the cluster's generated token)",
            )
        return value

    @property
    def token(self) -> bool:
        """Whether Ray's token authentication is on."""
        return self.mode == "token"


TOKEN_KEY = "auth_token"  # noqa: S105 - a key's name, not a token
"""The key of the token in the cluster's token Secret, as KubeRay's (clients read it with
``kubectl get secret <cluster> -o jsonpath='{.data.auth_token}'``)."""


def token_secret_name(cluster: str) -> str:
    """The token Secret of the Ray cluster named ``cluster``: the cluster's own name, as
    KubeRay names it."""
    return cluster


__all__ = ["TOKEN_KEY", "AuthOptions", "token_secret_name"]
