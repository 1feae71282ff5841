#!/usr/bin/env python3
"""Offline check of the documentation's links and anchors.

Checks README.md, docs/**/*.md and zoo/README.md: every relative link must name a file or
directory that exists, and every `#anchor` (in the same file or in another Markdown file) must
name a heading there (GitHub's slugs: lowercase, spaces to '-', punctuation other than '-' and
'_' removed, '-1', '-2', ... for repeated headings) or an explicit <a id/name> anchor. External
http(s) links are not fetched, only checked to be well-formed. Links inside code blocks and
code spans are not links and are skipped.

Usage: scripts/check-links.py [FILE.md ...]   (default: the files above)
Exit code: 0 when every link resolves, 1 otherwise (the broken links are listed).
Python 3 standard library only.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path
from urllib.parse import unquote, urlsplit

ROOT = Path(__file__).resolve().parent.parent

FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
ATX = re.compile(r"^ {0,3}(#{1,6})(?:[ \t]+(.*?))?[ \t]*$")
SETEXT = re.compile(r"^ {0,3}(=+|-+)[ \t]*$")
CODE_SPAN = re.compile(r"(`+)(.+?)(?<!`)\1(?!`)", re.S)
# [text](target "title") and ![alt](target); the text may hold one level of brackets.
INLINE = re.compile(
    r"!?\[(?:[^\[\]]|\[[^\[\]]*\])*\]\(\s*(<[^>\n]*>|[^\s()]*(?:\([^\s()]*\)[^\s()]*)*)"
    r"(?:\s+(?:\"[^\"]*\"|'[^']*'|\([^)]*\)))?\s*\)"
)
REF_DEF = re.compile(r"^ {0,3}\[[^\]]+\]:\s*(<[^>]*>|\S+)")
AUTOLINK = re.compile(r"<((?:https?|mailto):[^>\s]*)>")
HTML_ANCHOR = re.compile(r"<a\s[^>]*\b(?:id|name)\s*=\s*[\"']([^\"']+)[\"']", re.I)
HTML_TAG = re.compile(r"<[^>]+>")
HOST = re.compile(
    r"^(?:[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*$"
)


def default_files() -> list[Path]:
    files = [ROOT / "README.md"]
    files += sorted((ROOT / "docs").rglob("*.md"))
    files.append(ROOT / "zoo" / "README.md")
    return [f for f in files if f.is_file()]


def prose_lines(text: str) -> list[tuple[int, str]]:
    """(line number, line) outside fenced code blocks, code spans blanked out."""
    out: list[tuple[int, str]] = []
    fence: str | None = None
    for no, line in enumerate(text.split("\n"), 1):
        m = FENCE.match(line)
        if fence is not None:
            if m and m.group(1)[0] == fence[0] and len(m.group(1)) >= len(fence):
                fence = None
            continue
        if m:
            fence = m.group(1)
            continue
        if line.startswith("    ") and not line.strip().startswith(("-", "*", "|")) and (
            not out or out[-1][1].strip() == ""
        ):
            # An indented code block (after a blank line); list continuations are indented too,
            # but those follow a non-blank line.
            continue
        out.append((no, CODE_SPAN.sub(lambda s: " " * len(s.group(0)), line)))
    return out


def slug(heading: str) -> str:
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # links: their text
    text = HTML_TAG.sub("", text)
    text = text.strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors_of(path: Path, cache: dict[Path, set[str]]) -> set[str]:
    if path in cache:
        return cache[path]
    text = path.read_text(encoding="utf-8")
    seen: dict[str, int] = {}
    found: set[str] = set()

    def add(title: str) -> None:
        base = slug(title)
        n = seen.get(base, 0)
        seen[base] = n + 1
        found.add(base if n == 0 else f"{base}-{n}")

    fence: str | None = None
    prev = ""
    for line in text.split("\n"):
        m = FENCE.match(line)
        if fence is not None:
            if m and m.group(1)[0] == fence[0] and len(m.group(1)) >= len(fence):
                fence = None
            prev = ""
            continue
        if m:
            fence = m.group(1)
            prev = ""
            continue
        h = ATX.match(line)
        if h:
            title = re.sub(r"[ \t]+#+[ \t]*$", "", h.group(2) or "")
            add(title)
            prev = ""
            continue
        s = SETEXT.match(line)
        if s and prev.strip() and not prev.lstrip().startswith(("|", "-", "*", ">")):
            add(prev)
            prev = ""
            continue
        found.update(HTML_ANCHOR.findall(line))
        prev = line
    cache[path] = found
    return found


def check_external(url: str) -> str | None:
    if url.startswith("mailto:"):
        return None if re.fullmatch(r"mailto:[^@\s]+@[^@\s]+", url) else "malformed mailto link"
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https"):
        return f"unsupported scheme '{parts.scheme}'"
    host = parts.hostname or ""
    if not host or not (HOST.match(host) or re.fullmatch(r"\[[0-9a-fA-F:]+\]", parts.netloc)):
        return "malformed host"
    try:
        parts.port  # noqa: B018 - raises on a bad port
    except ValueError:
        return "malformed port"
    if re.search(r"\s", url):
        return "whitespace in URL"
    return None


def targets(text: str) -> list[tuple[int, str]]:
    found: list[tuple[int, str]] = []
    for no, line in prose_lines(text):
        for m in INLINE.finditer(line):
            found.append((no, m.group(1)))
        m = REF_DEF.match(line)
        if m:
            found.append((no, m.group(1)))
        for m in AUTOLINK.finditer(line):
            found.append((no, m.group(1)))
    return found


def check_file(path: Path, cache: dict[Path, set[str]]) -> list[str]:
    problems: list[str] = []
    rel = path.relative_to(ROOT)
    for no, raw in targets(path.read_text(encoding="utf-8")):
        target = raw[1:-1] if raw.startswith("<") and raw.endswith(">") else raw
        where = f"{rel}:{no}: ({target})"
        if not target:
            problems.append(f"{where} empty link")
            continue
        if re.match(r"^[A-Za-z][A-Za-z0-9+.-]*:", target):
            err = check_external(target)
            if err:
                problems.append(f"{where} {err}")
            continue
        if target.startswith("//"):
            problems.append(f"{where} protocol-relative link")
            continue
        file_part, _, anchor = target.partition("#")
        file_part = unquote(file_part)
        if file_part.startswith("/"):
            dest = (ROOT / file_part.lstrip("/")).resolve()
        elif file_part:
            dest = (path.parent / file_part).resolve()
        else:
            dest = path
        try:
            dest.relative_to(ROOT)
        except ValueError:
            problems.append(f"{where} points outside the repository")
            continue
        if not dest.exists():
            problems.append(f"{where} no such file or directory: {dest.relative_to(ROOT)}")
            continue
        if not anchor:
            continue
        if dest.is_file() and dest.suffix.lower() in (".md", ".markdown"):
            if unquote(anchor) not in anchors_of(dest, cache):
                problems.append(
                    f"{where} no heading or anchor '#{anchor}' in {dest.relative_to(ROOT)}"
                )
        elif dest.is_dir():
            problems.append(f"{where} anchor on a directory")
        elif not re.fullmatch(r"L\d+(-L\d+)?", anchor):
            problems.append(f"{where} anchor '#{anchor}' on a file that is not Markdown")
    return problems


def main(argv: list[str]) -> int:
    files = [Path(a).resolve() for a in argv] if argv else default_files()
    cache: dict[Path, set[str]] = {}
    problems: list[str] = []
    checked = 0
    for f in files:
        problems += check_file(f, cache)
        checked += 1
    if problems:
        print(f"{len(problems)} broken link(s) in {checked} file(s):", file=sys.stderr)
        for p in problems:
            print(f"  {p}", file=sys.stderr)
        return 1
    print(f"links and anchors: ok ({checked} files)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
