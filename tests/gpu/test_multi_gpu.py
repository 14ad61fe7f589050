"""Every op on a second GPU (device 1), on two GPUs at once, from two streams at once and from two host threads at
once: each result checked against the independent numpy formulation (``tests/props.py``). The
plugins too: the conformance harness on device 1 (enqueue captured in a CUDA graph there as well)."""

import threading

import props
import pytest
import torch

import torchtrt_plugins
from torchtrt_plugins import converters
from torchtrt_plugins.testing import harness as H

OPS = sorted(entry.spec.name for entry in torchtrt_plugins.all_ops())
ROUNDS = 10

two_gpus = pytest.mark.skipif(
    not torch.cuda.is_available() or torch.cuda.device_count() < 2,
    reason=f"needs 2 CUDA GPUs, {torch.cuda.device_count() if torch.cuda.is_available() else 0} visible",
)


def test_every_op_has_an_example():
    assert sorted(props.examples("cpu")) == OPS


def _run_rounds(case, stream, results, key, errors):
    """ROUNDS calls of the op on `stream` (on the stream's device), the last output kept."""
    try:
        with torch.cuda.device(stream.device), torch.cuda.stream(stream):
            out = None
            for _ in range(ROUNDS):
                case.restore()
                out = case.call()
            stream.synchronize()
            results[key] = out
    except Exception as err:  # noqa: BLE001 - reported by the test thread
        errors.append(f"{key}: {type(err).__name__}: {err}")


def _concurrently(jobs):
    """jobs: {key: (case, stream)}; each in its own host thread, all started together."""
    results, errors = {}, []
    threads = [
        threading.Thread(target=_run_rounds, args=(case, stream, results, key, errors))
        for key, (case, stream) in jobs.items()
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    return results


@two_gpus
@pytest.mark.parametrize("op", OPS)
def test_op_on_device_1(op):
    case = props.examples("cuda:1")[op]
    with torch.cuda.device(1):
        out = case.call()
        torch.cuda.synchronize(1)
    assert all(o.device == torch.device("cuda:1") for o in props.outputs(out))
    props.CASES[op].check(case, out)


@two_gpus
@pytest.mark.parametrize("op", OPS)
def test_op_on_two_gpus_at_once(op):
    cases = {d: props.examples(f"cuda:{d}", seed=d)[op] for d in (0, 1)}
    streams = {d: torch.cuda.Stream(device=d) for d in (0, 1)}
    results = _concurrently({d: (cases[d], streams[d]) for d in (0, 1)})
    for d in (0, 1):
        assert all(o.device == torch.device(f"cuda:{d}") for o in props.outputs(results[d]))
        props.CASES[op].check(cases[d], results[d])


@pytest.mark.parametrize("op", OPS)
def test_op_from_two_streams_at_once(op):
    cases = [props.examples("cuda", seed=s)[op] for s in (0, 1)]
    streams = [torch.cuda.Stream(), torch.cuda.Stream()]
    torch.cuda.synchronize()
    outs = [None, None]
    for _ in range(ROUNDS):  # interleaved launches: the two streams' kernels overlap on the device
        for i in (0, 1):
            with torch.cuda.stream(streams[i]):
                cases[i].restore()
                outs[i] = cases[i].call()
    torch.cuda.synchronize()
    for i in (0, 1):
        props.CASES[op].check(cases[i], outs[i])


@pytest.mark.parametrize("op", OPS)
def test_op_from_two_host_threads_at_once(op):
    cases = {i: props.examples("cuda", seed=i)[op] for i in (0, 1)}
    results = _concurrently({i: (cases[i], torch.cuda.Stream()) for i in (0, 1)})
    for i in (0, 1):
        props.CASES[op].check(cases[i], results[i])


@two_gpus
@pytest.mark.parametrize("op", OPS)
def test_plugin_conformant_on_device_1(build, op):
    case = props.examples("cuda:1")[op]
    spec = torchtrt_plugins.get(op).spec
    call = converters.plan(spec, case.args, case.kwargs)
    tensors = [a for a in case.args if isinstance(a, torch.Tensor)]
    result = H.run_call(call, *tensors, library=build.library)  # casts inputs as the converter would
    result.assert_conformant()
    assert result.enqueue_skipped is None
    outs = result.run(0, "runtime").outputs
    assert all(o.device == torch.device("cuda:1") for o in outs)
    props.CASES[op].check(case, outs[0] if len(outs) == 1 else tuple(outs))
