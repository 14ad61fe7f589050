"""Property tests of every op's CUDA kernels: hypothesis draws shapes (empty, 1, odd, large), dtypes, memory layouts
(strided, transposed, one element off alignment) and field values, every tactic, and the output is compared with an
independent numpy formulation (``tests/props.py``). The output's memory is poisoned first (a freed
block of 0xFF bytes the caching allocator hands back), so an element the kernel does not write shows up."""

import props
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

import torchtrt_plugins

OPS = sorted(props.CASES)  # every registered op: tests/cpu/test_op_props.py checks the registry has no other
SETTINGS = props.hypothesis_settings(max_examples=60)


def _tactics(op):
    return [0] + [t.value for t in torchtrt_plugins.get(op).spec.tactics]


def poisoned_call(case, tactic=0):
    """Call once for the output's size, free a block of that size filled with 0xFF (NaN in float types, -1 in
    integers), call again: the second output most likely lands in the poisoned block."""
    first = props.outputs(case.call(tactic))
    nbytes = sum(o.numel() * o.element_size() for o in first)
    del first
    poison = torch.full((max(nbytes, 1),), 0xFF, dtype=torch.uint8, device="cuda")
    del poison
    case.restore()
    return case.call(tactic)


@pytest.mark.parametrize("op", OPS)
@SETTINGS
@given(data=st.data())
def test_matches_numpy_for_every_tactic(op, data):
    case = props.CASES[op].draw(data, "cuda")
    tactic = data.draw(st.sampled_from(_tactics(op)), label="tactic")
    out = poisoned_call(case, tactic)
    torch.cuda.synchronize()
    props.CASES[op].check(case, out)
