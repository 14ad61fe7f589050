"""Old path of :mod:`torchtrt_plugins.sdk.eager_kernel`, kept for one release: the same module under both names."""

import sys

from .sdk import eager_kernel

sys.modules[__name__] = eager_kernel
