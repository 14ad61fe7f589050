"""The harness's createPlugin fuzz (csrc/harness/fuzz.h, run as the program ttp_fuzz_fields so that a crash fails the
test instead of the run) over every creator of our plugin library, the example package's, torchvision's roi_align and
nms and the SDK's test ops: no crash, no invalid field set accepted, no silent rejection, every created plugin
survives the serialization round trip. A modest count here; scripts/fuzz_fields.sh runs it long, under
AddressSanitizer with LeakSanitizer."""

from __future__ import annotations

from torchtrt_plugins.testing import require_sdk_build

require_sdk_build()

import json  # noqa: E402
import subprocess  # noqa: E402
from pathlib import Path  # noqa: E402

import field_fuzz  # noqa: E402
import fixtures  # noqa: E402
import pytest  # noqa: E402
from example_package import import_myops  # noqa: E402

import_myops()  # declares myops' ops (and puts examples/myops on sys.path) once, at import

COUNT = 400
SEED = 1


@pytest.fixture(scope="module")
def program(build) -> Path:
    path = Path(build.directory) / "ttp_fuzz_fields"
    if build.prebuilt and not path.is_file():
        pytest.skip(f"{build.directory} (prebuilt) carries no ttp_fuzz_fields")
    assert path.is_file(), f"the harness build must produce {path}"
    return path


def fuzz(program: Path, tmp_path: Path, libraries: list, **options) -> tuple[int, dict]:
    request = tmp_path / "request.json"
    request.write_text(json.dumps(field_fuzz.request(libraries, **options)))
    done = subprocess.run([str(program), str(request)], capture_output=True, text=True, timeout=600)
    assert done.returncode in (0, 1), f"ttp_fuzz_fields crashed ({done.returncode}):\n{done.stdout}\n{done.stderr}"
    return done.returncode, json.loads(done.stdout)


def test_every_creator_survives_the_fuzz(build, program, tmp_path):
    libraries = [build.library, *field_fuzz.declared_libraries()]
    status, report = fuzz(program, tmp_path, libraries, seed=SEED, count=COUNT)
    assert report["violation_count"] == 0, json.dumps(report["violations"], indent=1)
    assert status == 0
    by_plugin = {c["plugin"]: c for c in report["creators"]}
    assert set(by_plugin) == field_fuzz.plugin_ids()
    for plugin, counts in by_plugin.items():
        assert counts["attempts"] == COUNT
        # The seeds get valid field sets through: each creator made plugins, and all of them round-tripped.
        assert counts["created"] > COUNT // 20, (plugin, counts)
        assert counts["round_trips"] == counts["created"], (plugin, counts)
        assert counts["rejected"] >= counts["must_reject"] > COUNT // 4, (plugin, counts)


def test_the_fuzz_reports_a_plugin_that_breaks_the_round_trip(build, program, tmp_path):
    """The harness's broken test plugins: ScaleSerializeChangesField serializes a different scale than it was made
    with, which the fuzz must find (and nothing else there: their createPlugin is ours)."""
    status, report = fuzz(program, tmp_path, [fixtures.broken_plugins(build)], seed=SEED, count=100)
    assert status == 1
    culprits = {(v["plugin"], v["rule"]) for v in report["violations"]}
    assert culprits == {("torchtrt::ScaleSerializeChangesField v1", "serialization")}


def test_an_iteration_replays_alone(build, program, tmp_path):
    """A violation names its iteration: {"first": i, "count": 1} replays exactly that case."""
    _, report = fuzz(program, tmp_path, [fixtures.broken_plugins(build)], seed=SEED, count=100)
    first = report["violations"][0]
    request = field_fuzz.request([fixtures.broken_plugins(build)], seed=SEED, count=1)
    request["first"] = first["iteration"]
    path = tmp_path / "replay.json"
    path.write_text(json.dumps(request))
    done = subprocess.run([str(program), str(path)], capture_output=True, text=True, timeout=600)
    replayed = [v for v in json.loads(done.stdout)["violations"] if v["plugin"] == first["plugin"]]
    assert replayed == [first]
