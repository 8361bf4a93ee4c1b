# cython: language_level=3
"""Kernel module index (placeholder until implemented)."""
__all__ = []
