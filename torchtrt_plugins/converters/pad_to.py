"""torchtrt.pad_to -> PadTo plugin (fields height, width, value; symbolic height/width become shape inputs)."""

from ..ops.pad_to import ENTRY
from ._factory import make_converter

convert = make_converter(ENTRY)
