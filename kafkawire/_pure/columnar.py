"""Kernel module columnar (placeholder until implemented)."""
__all__ = []
