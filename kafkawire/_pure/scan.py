"""Kernel module scan (placeholder until implemented)."""
__all__ = []
