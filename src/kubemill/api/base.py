"""The pydantic base shared by every manifest model.

Fields are snake_case in Python and camelCase on the wire, exactly as Kubernetes and
the upstream projects spell them, so an upstream manifest loads unchanged. Unknown
fields are rejected (and :mod:`kubemill.api.loader` turns that into a "did you mean").
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict
from pydantic.alias_generators import to_camel


class KubeModel(BaseModel):
    """Base of all manifest models: camelCase aliases, unknown fields forbidden."""

    model_config = ConfigDict(
        alias_generator=to_camel,
        populate_by_name=True,
        extra="forbid",
        validate_assignment=False,
    )

    def to_wire(self) -> dict[str, Any]:
        """The object as Kubernetes would send it: camelCase, unset fields left out."""
        return self.model_dump(mode="json", by_alias=True, exclude_none=True)


class OpenModel(KubeModel):
    """A model that keeps fields it does not know (used where Kubernetes itself is open)."""

    model_config = ConfigDict(extra="allow")
