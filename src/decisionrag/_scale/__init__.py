"""Past one machine: existing engines, never a home-made cluster.

- :mod:`._ray_build`: ``decisionrag build --engine ray`` reads sources and embeds on Ray Data
  (CPU or GPU workers); one writer on the driver writes the tree atomically.
"""

from ._ray_build import RayOptions, build_on_ray, ray_encoder, ray_read

__all__ = ["RayOptions", "build_on_ray", "ray_encoder", "ray_read"]
