"""The catalogue of ops. Importing this package registers every op's spec."""

from . import masked_rows, pad_to, rms_norm  # noqa: F401
