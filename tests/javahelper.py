"""Compile and run the Java helpers in ``tests/java/`` against Kafka's own jars.

Kafka 3.9.1's ``kafka-clients.jar`` with lz4-java, snappy-java, zstd-jni,
slf4j-api (and Jackson, for the generated JSON converters) ships in the PyPI
wheel ``shigawire-apache-flink-libraries`` under ``pyflink/lib/``.
"""
from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
from pathlib import Path
from typing import List, Optional, Sequence

JAVA_DIR = Path(__file__).parent / "java"
JARS = ("kafka-clients.jar", "lz4-java.jar", "snappy-java.jar", "zstd-jni.jar", "slf4j-api.jar",
        "jackson-core.jar", "jackson-databind.jar", "jackson-annotations.jar")


def find_kafka_jars() -> Optional[List[Path]]:
    """The jar paths, or None when the wheel or a JDK is missing."""
    if shutil.which("javac") is None or shutil.which("java") is None:
        return None
    spec = importlib.util.find_spec("pyflink")
    if spec is None or not spec.submodule_search_locations:
        return None
    for base in spec.submodule_search_locations:
        lib = Path(base) / "lib"
        if (lib / "kafka-clients.jar").exists():
            return [lib / j for j in JARS if (lib / j).exists()]
    return None


class JavaRunner:
    """Compiles ``tests/java/<Name>.java`` once per session and runs it."""

    def __init__(self, jars: Sequence[Path], out_dir: Path) -> None:
        self.jars = list(jars)
        self.out_dir = Path(out_dir)
        self._compiled: set = set()

    @property
    def classpath(self) -> str:
        return os.pathsep.join([str(self.out_dir)] + [str(j) for j in self.jars])

    def compile(self, name: str) -> None:
        if name in self._compiled:
            return
        src = JAVA_DIR / f"{name}.java"
        subprocess.run(["javac", "-nowarn", "-encoding", "UTF-8", "-d", str(self.out_dir),
                        "-cp", self.classpath, str(src)], check=True, capture_output=True, text=True)
        self._compiled.add(name)

    def run(self, name: str, *args: str, input: Optional[bytes] = None,
            timeout: float = 300) -> subprocess.CompletedProcess:
        """Run helper ``name`` with ``args``; raise with its stderr on failure."""
        self.compile(name)
        proc = subprocess.run(["java", "-Xss4m", "-cp", self.classpath, name, *map(str, args)],
                              input=input, capture_output=True, timeout=timeout)
        if proc.returncode != 0:
            raise AssertionError(f"java {name} {' '.join(map(str, args))} failed:\n"
                                 f"{proc.stderr.decode(errors='replace')[-4000:]}")
        return proc
