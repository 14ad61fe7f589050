"""torchtrt.rms_norm -> RMSNorm plugin (field eps)."""

from ..ops.rms_norm import ENTRY
from ._factory import make_converter

convert = make_converter(ENTRY)
