"""The image names each environment kubemill builds itself (:mod:`.environments`) stands
for, by the environment's name: fnmatch globs, under any registry.

Apart from :mod:`.environments` (its build recipes), because resolving a job's images, as
every local submission does (:func:`~.images.managed_environment`), needs these names only:
an image that names none of them loads none of the recipes.
"""

from __future__ import annotations

MANAGED_IMAGES: dict[str, tuple[str, ...]] = {
    # Mars's own image, and the image scripts/build-image.sh builds (under any registry).
    "mars": (
        "marsproject/mars",
        "marsproject/mars:*",
        "marsproject/mars-*",
        "kubemill-mars",
        "kubemill-mars:*",
        "*/kubemill-mars",
        "*/kubemill-mars:*",
    ),
}
"""Environment name -> the image names (globs) that stand for it."""
