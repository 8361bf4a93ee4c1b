# cython: language_level=3
"""Kernel module crc (placeholder until implemented)."""
__all__ = []
