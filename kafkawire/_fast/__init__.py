"""Compiled (Cython) kernels; see ``kafkawire._pure`` for their Python twins."""
