"""torchtrt.masked_rows -> MaskedRows plugin (mask cast to int32; output 1, the size tensor K, stays hidden)."""

from ..ops.masked_rows import ENTRY
from ._factory import make_converter

convert = make_converter(ENTRY)
