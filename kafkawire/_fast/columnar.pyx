# cython: language_level=3
"""Kernel module columnar (placeholder until implemented)."""
__all__ = []
