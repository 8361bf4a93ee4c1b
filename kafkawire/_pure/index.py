"""Kernel module index (placeholder until implemented)."""
__all__ = []
