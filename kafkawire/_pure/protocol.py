"""Kernel module protocol (placeholder until implemented)."""
__all__ = []
