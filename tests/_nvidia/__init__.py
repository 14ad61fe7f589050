"""Test-only bridges to NVIDIA code that its Python bindings do not expose (shared by the rtx and tt tiers)."""
