# cython: language_level=3
"""Kernel module protocol (placeholder until implemented)."""
__all__ = []
