"""Pure-Python twins of the compiled kernels in ``kafkawire._fast``.

Same module names, function names and signatures; the test suite runs
against both.  Nothing here holds Kafka policy: kernels take a buffer and
positions and return plain values, raising ``kafkawire.errors`` on bad bytes.
"""
