# cython: language_level=3
"""Kernel module records (placeholder until implemented)."""
__all__ = []
