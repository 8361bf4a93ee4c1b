# cython: language_level=3
"""Kernel module scan (placeholder until implemented)."""
__all__ = []
