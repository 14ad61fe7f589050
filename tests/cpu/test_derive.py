"""_derive's parts that need no SDK build (the wheel's test stage runs these too)."""

import types
from pathlib import Path

import torch

from torchtrt_plugins import _derive


def _guard(path: Path):
    location = types.SimpleNamespace(framework_loc=types.SimpleNamespace(filename=str(path)))
    return types.SimpleNamespace(sloc=location)


def test_a_package_installed_beside_torch_is_user_code():
    """Fake-kernel checks are told from torch's own guards by file: site-packages/torchtrt_plugins (or any package
    named torch*) is not torch, though its path starts with torch's (the wheel's test stage lost the plugins' checks:
    there both live in one site-packages)."""
    torch_dir = Path(torch.__file__).resolve().parent
    assert _derive._from_user(_guard(torch_dir.parent / "torchtrt_plugins" / "ops" / "rms_norm.py"))
    assert _derive._from_user(_guard(torch_dir.parent / "torchvision" / "_meta_registrations.py"))
    assert not _derive._from_user(_guard(torch_dir / "_meta_registrations.py"))
