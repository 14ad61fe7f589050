"""Kernels written in Python as launchers of declared ops, in four modules: :mod:`.describe` (what a kernel is and how
the op's arguments reach its parameters), :mod:`.compile` (to cubin, ahead of time), :mod:`.source` (the C++
launchers that embed and launch the cubins) and :mod:`.launch` (the same kernel launched from Python)."""
