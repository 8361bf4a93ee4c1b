"""Kernel module varint (placeholder until implemented)."""
__all__ = []
