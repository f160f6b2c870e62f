"""The pydantic base shared by every manifest model.

Fields are snake_case in Python and camelCase on the wire, exactly as Kubernetes and
the upstream projects spell them, so an upstream manifest loads unchanged. Unknown
fields are rejected (and :mod:`kubemill.api.loader` turns that into a "did you mean").
Known fields kubemill cannot honour are refused with :func:`refused`, never ignored.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict
from pydantic.alias_generators import to_camel
from pydantic_core import PydanticCustomError


def invalid(message: str, hint: str) -> PydanticCustomError:
    """The error for a value a field cannot take, with our own final message and hint.

    As :func:`refused`, the loader turns it into a field error at the field's path.
    """
    return PydanticCustomError(
        "kubemill_invalid", message.replace("{", "{{").replace("}", "}}"), {"hint": hint}
    )


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


def refused(message: str, hint: str) -> PydanticCustomError:
    """The error for a field kubemill accepts in its schema but cannot honour (yet).

    The loader turns it into a :class:`~kubemill.api.errors.FieldError` at the field's
    path, with ``message`` and ``hint`` as written. Every field of the models is either
    honoured or refused this way (docs/fields.md lists which): none is silently ignored.
    """
    # pydantic formats the message with ctx; ours is final, so braces are escaped.
    return PydanticCustomError(
        "kubemill_refused", message.replace("{", "{{").replace("}", "}}"), {"hint": hint}
    )
