"""Kernel module records (placeholder until implemented)."""
__all__ = []
