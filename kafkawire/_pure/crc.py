"""Kernel module crc (placeholder until implemented)."""
__all__ = []
