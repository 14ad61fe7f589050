"""The catalogue of ops. Importing this package registers every op's spec."""

from . import rms_norm  # noqa: F401
