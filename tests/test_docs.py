"""The documentation site cannot rot.

* ``mkdocs build --strict`` succeeds (any warning, a broken link or anchor, a
  name mkdocstrings cannot find, fails it).
* Every ```python and ```bash block in ``docs/`` and the README runs.  A page's blocks run in
  order in one fresh temporary folder and share one namespace, as a reader
  following the page would.  ``<!-- skip-test -->`` on the line before a block
  skips it (installing packages, needing a cluster); ``<!-- docs-test: sample -->``
  anywhere in a page writes the sample ``kafka-logs`` folder before its blocks run.
* The built site, served over HTTP, is opened page by page in headless Chromium:
  every page renders its title with no JavaScript error, and every internal
  link, image, stylesheet and script resolves, fragments included.
"""
from __future__ import annotations

import functools
import html.parser
import http.server
import json
import os
import re
import shutil
import subprocess
import sys
import threading
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Dict, List, Optional, Set, Tuple
from urllib.parse import unquote, urljoin, urlsplit

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
INSTALLED = os.environ.get("KAFKAWIRE_TEST_INSTALLED") == "1"
RUN_LANGS = {"python": "python", "py": "python", "bash": "bash", "sh": "bash"}
SKIP = "<!-- skip-test -->"
SAMPLE = "<!-- docs-test: sample -->"

pytestmark = pytest.mark.one_backend

_FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,})[ \t]*(?P<lang>[\w+-]*)(?P<rest>.*)$")


@dataclass
class Block:
    page: str      # path relative to the repository root
    line: int      # 1-based line of the first code line
    lang: str      # "python" or "bash"
    code: str
    skip: bool


def page_blocks(path: Path, rel: Optional[str] = None) -> List[Block]:
    """The fenced code blocks of one Markdown page that the test runs (or skips)."""
    lines = path.read_text(encoding="utf-8").split("\n")
    rel = rel or path.relative_to(ROOT).as_posix()
    out: List[Block] = []
    i = 0
    while i < len(lines):
        m = _FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        indent, fence, lang = m.group("indent"), m.group("fence"), m.group("lang").lower()
        prev = next((lines[j].strip() for j in range(i - 1, -1, -1) if lines[j].strip()), "")
        body, j = [], i + 1
        while j < len(lines):
            stripped = lines[j].strip()
            if stripped.startswith(fence[0] * len(fence)) and set(stripped) == {fence[0]}:
                break
            body.append(lines[j][len(indent):] if lines[j].startswith(indent) else lines[j].lstrip())
            j += 1
        if lang in RUN_LANGS:
            out.append(Block(rel, i + 2, RUN_LANGS[lang], "\n".join(body) + "\n", prev == SKIP))
        i = j + 1
    return out


def doc_pages() -> List[Path]:
    return sorted(p for p in DOCS.rglob("*.md") if "hooks" not in p.parts)


def runnable_pages() -> List[Path]:
    pages = doc_pages() + [ROOT / "README.md"]
    return [p for p in pages if any(not b.skip for b in page_blocks(p))]


_RUNNER = r"""
import json, subprocess, sys
blocks = json.load(open(sys.argv[1]))
namespace = {"__name__": "__main__"}
for b in blocks:
    if b["skip"]:
        continue
    print(f"--- {b['page']}:{b['line']} ({b['lang']})", flush=True)
    if b["lang"] == "python":
        # pad so that tracebacks name the line of the Markdown page
        exec(compile("\n" * (b["line"] - 1) + b["code"], b["page"], "exec"), namespace)
        sys.stdout.flush()
    else:
        rc = subprocess.call(["bash", "-e", "-c", b["code"]])
        if rc:
            sys.exit(f"{b['page']}:{b['line']}: bash block exited with status {rc}")
"""


@functools.lru_cache(maxsize=None)
def _bin_dir(tmp: str) -> str:
    """A folder with a ``kafkawire`` command when this interpreter's environment has none."""
    here = os.path.dirname(sys.executable)
    path = os.path.join(tmp, "bin")
    os.makedirs(path, exist_ok=True)
    if shutil.which("kafkawire", path=here) is None:
        shim = os.path.join(path, "kafkawire")
        with open(shim, "w") as f:
            f.write(f'#!/bin/sh\nexec "{sys.executable}" -m kafkawire.cli "$@"\n')
        os.chmod(shim, 0o755)
    return path


def example_env(tmp: Path) -> Dict[str, str]:
    env = dict(os.environ)
    bins = [_bin_dir(str(tmp.parent)), os.path.dirname(sys.executable)]
    env["PATH"] = os.pathsep.join(bins + [env.get("PATH", "")])
    if not INSTALLED:  # a source checkout: let the example processes import it
        env["PYTHONPATH"] = os.pathsep.join([str(ROOT)] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
    env["MPLBACKEND"] = "Agg"
    env["KAFKAWIRE_NO_PROGRESS"] = "1"
    env.pop("KAFKAWIRE_BACKEND", None)
    return env


@pytest.fixture(scope="module")
def sample_logs(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("sample") / "kafka-logs"
    subprocess.run([sys.executable, "-m", "kafkawire.spark.sample", str(out)], check=True,
                   env=example_env(out.parent), stdout=subprocess.DEVNULL, cwd=str(out.parent))
    return out


@pytest.mark.parametrize("page", runnable_pages(), ids=lambda p: p.relative_to(ROOT).as_posix())
def test_examples_run(page: Path, tmp_path: Path, request) -> None:
    """Every runnable block of the page, in order, in a fresh folder."""
    blocks = page_blocks(page)
    work = tmp_path / "work"
    work.mkdir()
    if SAMPLE in page.read_text(encoding="utf-8"):
        shutil.copytree(request.getfixturevalue("sample_logs"), work / "kafka-logs")
    spec = tmp_path / "blocks.json"
    spec.write_text(json.dumps([asdict(b) for b in blocks]))
    proc = subprocess.run([sys.executable, "-c", _RUNNER, str(spec)], cwd=str(work),
                          env=example_env(tmp_path), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          timeout=900)
    out = proc.stdout.decode("utf-8", "replace")
    assert proc.returncode == 0, f"an example in {page.relative_to(ROOT)} failed:\n{out[-6000:]}"


def test_block_parser_finds_indented_and_skipped_blocks(tmp_path: Path) -> None:
    page = tmp_path / "probe.md"
    text = ("text\n\n<!-- skip-test -->\n```bash\npip install x\n```\n\n"
            "!!! note\n    ```python title=\"x.py\"\n    a = 1\n\n    b = a\n    ```\n\n"
            "````text\n```python\nnot run\n```\n````\n")
    page.write_text(text)
    blocks = page_blocks(page, "probe.md")
    assert [(b.lang, b.skip, b.code) for b in blocks] == [
        ("bash", True, "pip install x\n"), ("python", False, "a = 1\n\nb = a\n")]
    assert blocks[1].line == 10


# -- the built site ----------------------------------------------------------------

@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("site")
    env = example_env(out)
    env["NO_MKDOCS_2_WARNING"] = "1"
    proc = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--clean",
                           "-f", str(ROOT / "mkdocs.yml"), "-d", str(out)],
                          cwd=str(ROOT), env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    log = proc.stdout.decode("utf-8", "replace")
    assert proc.returncode == 0, f"mkdocs build --strict failed:\n{log[-8000:]}"
    return out


def test_site_builds_with_warnings_as_errors(site: Path) -> None:
    assert (site / "index.html").is_file()
    assert (site / "search" / "search_index.json").is_file()
    index = json.loads((site / "search" / "search_index.json").read_text())
    assert len(index["docs"]) > 50, "the search index is nearly empty"


def test_cli_reference_lists_every_command_and_flag(site: Path) -> None:
    from kafkawire.cli.main import build_parser
    import argparse
    page = (site / "reference" / "cli" / "index.html").read_text()
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    for name, cmd in sub.choices.items():
        assert f"kafkawire {name}" in page
        for action in cmd._actions:
            for flag in action.option_strings:
                if flag not in ("-h", "--help"):
                    assert flag in page, f"kafkawire {name} {flag} missing from the CLI reference"


def test_spark_options_reference_lists_every_option() -> None:
    from kafkawire.spark.options import KNOWN
    text = (DOCS / "reference" / "spark-options.md").read_text().lower()
    missing = [name for name in KNOWN if name != "paths" and f"`{name}`" not in text]
    assert not missing, f"options missing from docs/reference/spark-options.md: {missing}"


def _chromium() -> Optional[str]:
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        found = shutil.which(name)
        if found:
            return found
    return None


class _Browser:
    """Headless Chromium driven over the DevTools protocol on a pipe (no extra packages).

    Chromium reads commands from its fd 3 and writes answers and events to fd 4,
    each a JSON object followed by a NUL byte.
    """

    def __init__(self, executable: str, profile: Path) -> None:
        import fcntl
        cmd_r, self._w = os.pipe()
        self._r, out_w = os.pipe()
        # move the child's ends above 4 so that placing them at 3 and 4 cannot clobber them
        cmd_r2, out_w2 = fcntl.fcntl(cmd_r, fcntl.F_DUPFD, 10), fcntl.fcntl(out_w, fcntl.F_DUPFD, 10)
        os.close(cmd_r)
        os.close(out_w)

        def place() -> None:
            os.dup2(cmd_r2, 3)
            os.dup2(out_w2, 4)
        self.proc = subprocess.Popen(
            [executable, "--headless=new", "--remote-debugging-pipe", "--no-sandbox", "--disable-gpu",
             "--disable-dev-shm-usage", "--no-first-run", "--no-default-browser-check",
             f"--user-data-dir={profile}", "about:blank"],
            pass_fds=(3, 4, cmd_r2, out_w2), preexec_fn=place,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        os.close(cmd_r2)
        os.close(out_w2)
        self._buf = b""
        self._id = 0
        self.events: List[dict] = []
        target = self.call("Target.createTarget", {"url": "about:blank"})["targetId"]
        self.session = self.call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        for domain in ("Page", "Runtime", "Log"):
            self.call(f"{domain}.enable", session=self.session)

    def _read(self, deadline: float) -> dict:
        import select
        import time
        while b"\0" not in self._buf:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("Chromium did not answer in time")
            if select.select([self._r], [], [], left)[0]:
                chunk = os.read(self._r, 1 << 20)
                if not chunk:
                    raise RuntimeError("Chromium exited")
                self._buf += chunk
        message, self._buf = self._buf.split(b"\0", 1)
        return json.loads(message)

    def call(self, method: str, params: Optional[dict] = None, session: Optional[str] = None,
             timeout: float = 60) -> dict:
        import time
        self._id += 1
        message = {"id": self._id, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = session
        os.write(self._w, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + timeout
        while True:
            answer = self._read(deadline)
            if answer.get("id") == self._id:
                if "error" in answer:
                    raise RuntimeError(f"{method}: {answer['error']}")
                return answer.get("result", {})
            self.events.append(answer)

    def open(self, url: str, timeout: float = 60) -> Tuple[str, List[str]]:
        """Load ``url``; return the rendered DOM and the errors the page reported."""
        import time
        self.events.clear()
        self.call("Page.navigate", {"url": url}, session=self.session)
        deadline = time.monotonic() + timeout
        while not any(e.get("method") == "Page.loadEventFired" for e in self.events):
            self.events.append(self._read(deadline))
        dom = self.call("Runtime.evaluate", {"expression": "document.documentElement.outerHTML",
                                             "returnByValue": True}, session=self.session)
        errors = []
        for e in self.events:
            p = e.get("params", {})
            if e.get("method") == "Runtime.exceptionThrown":
                errors.append(p["exceptionDetails"].get("exception", {}).get("description")
                              or p["exceptionDetails"].get("text", "exception"))
            elif e.get("method") == "Runtime.consoleAPICalled" and p.get("type") == "error":
                errors.append(" ".join(str(a.get("value", a.get("description", ""))) for a in p["args"]))
            elif e.get("method") == "Log.entryAdded" and p["entry"]["level"] == "error":
                errors.append(f"{p['entry']['text']} {p['entry'].get('url', '')}")
        return dom["result"]["value"], errors

    def close(self) -> None:
        try:
            self.call("Browser.close", timeout=10)
        except (RuntimeError, TimeoutError, OSError):
            pass
        try:
            self.proc.wait(20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)
        os.close(self._w)
        os.close(self._r)


class _Links(html.parser.HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.refs: List[Tuple[str, str]] = []
        self.ids: Set[str] = set()
        self.title = ""
        self._in_h1 = False

    def handle_starttag(self, tag, attrs) -> None:
        a = dict(attrs)
        for key in ("id", "name"):
            if a.get(key) and (key == "id" or tag == "a"):
                self.ids.add(a[key])
        if tag == "a" and a.get("href"):
            self.refs.append(("a", a["href"]))
        elif tag in ("img", "script") and a.get("src"):
            self.refs.append((tag, a["src"]))
        elif tag == "link" and a.get("href") and a.get("rel") in ("stylesheet", "icon"):
            self.refs.append((tag, a["href"]))
        if tag == "h1":
            self._in_h1 = True

    def handle_endtag(self, tag) -> None:
        if tag == "h1":
            self._in_h1 = False

    def handle_data(self, data) -> None:
        if self._in_h1:
            self.title += data


def _parse(text: str) -> _Links:
    p = _Links()
    p.feed(text)
    return p


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args) -> None:
        pass


def test_site_renders_in_a_browser_and_links_resolve(site: Path, tmp_path: Path) -> None:
    executable = _chromium()
    if executable is None:
        if INSTALLED:
            pytest.fail("Chromium is needed for the docs check: apt-get install chromium")
        pytest.skip("Chromium not installed (apt-get install chromium)")
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_Quiet, directory=str(site)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_address[1]}/"
    pages = sorted(p.relative_to(site).as_posix() for p in site.rglob("*.html"))
    rendered: Dict[str, Tuple[str, str, List[str]]] = {}
    browser = _Browser(executable, tmp_path / "profile")
    try:
        for rel in pages:
            url = base + (rel[:-len("index.html")] if rel.endswith("index.html") else rel)
            dom, errors = browser.open(url)
            rendered[rel] = (url, dom, errors)
    finally:
        browser.close()
        server.shutdown()

    doms = {rel: _parse(dom) for rel, (_, dom, _) in rendered.items()}
    problems: List[str] = []
    for rel, (url, dom, errors) in rendered.items():
        parsed = doms[rel]
        if not parsed.title.strip():
            problems.append(f"{rel}: no rendered <h1> (blank page?)")
        if rel != "404.html" or not all("404" in e for e in errors):
            problems.extend(f"{rel}: browser reported: {e}" for e in errors)
        for kind, ref in parsed.refs:
            target = urlsplit(urljoin(url, ref))
            if target.scheme not in ("http", "https") or target.netloc != urlsplit(base).netloc:
                continue
            path = unquote(target.path.lstrip("/"))
            if path == "" or path.endswith("/"):
                path += "index.html"
            if not (site / path).is_file():
                problems.append(f"{rel}: {kind} {ref} -> {path} does not exist")
                continue
            if target.fragment and kind == "a" and path.endswith(".html"):
                ids = doms[path].ids if path in doms else _parse((site / path).read_text()).ids
                if unquote(target.fragment) not in ids:
                    problems.append(f"{rel}: link {ref} -> no #{target.fragment} in {path}")
    assert len(rendered) >= 30, f"only {len(rendered)} pages rendered"
    assert not problems, "\n".join(sorted(set(problems))[:60])


_PROCESS_WORDS = re.compile(r"\bissue\s+#?\d+|(?<!progress )\bbars?\b|\bsession \d+|\bthe lead\b", re.I)


def test_user_facing_text_speaks_of_the_product_only() -> None:
    """The README and the docs describe kafkawire, not how it was made."""
    found = []
    for page in doc_pages() + [ROOT / "README.md", ROOT / "CHANGELOG.md"]:
        for n, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1):
            for m in _PROCESS_WORDS.finditer(line):
                found.append(f"{page.relative_to(ROOT)}:{n}: {m.group(0)!r}")
    assert not found, "\n".join(found)
