# cython: language_level=3
"""Kernel module varint (placeholder until implemented)."""
__all__ = []
