"""mkdocs hook: pages link to files of the repository outside docs/ (BENCHMARKS.md,
CHANGELOG.md, examples/*.py, ...) by their relative path, as they do on GitHub. Each such
file is published under repo/<path> (a Markdown one as a page, others as they are), and
the links are rewritten to it, so `mkdocs build --strict` checks them like any other and
the site stands alone (offline, no repository host needed). README.md is not published:
the site is what it links to."""

import posixpath
import re
from pathlib import Path

from mkdocs.structure.files import File

# [text](target) and ![alt](target); the target up to ')' or '#', no scheme.
LINK = re.compile(r"(\]\()(?![a-z][a-z0-9+.-]*:|#|/)([^)#\s]+)((?:#[^)\s]*)?\))")
PREFIX = "repo"


def _repo_target(page_uri, target, docs_dir, root):
    """The repository path a relative link of `page_uri` points to, when it leaves
    docs/ and names a file that exists; else None."""
    joined = posixpath.normpath(posixpath.join("docs", posixpath.dirname(page_uri), target))
    if joined.startswith("docs/") or joined.startswith(".."):
        return None
    return joined if (root / joined).is_file() else None


def _links(text):
    return [m.group(2) for m in LINK.finditer(text)]


def on_files(files, config):
    docs_dir = Path(config["docs_dir"])
    root = docs_dir.parent
    wanted = set()
    queue = [f for f in files if f.src_uri.endswith(".md")]
    seen_md = set()
    # Published Markdown files may link to further repository files: follow them.
    while queue:
        f = queue.pop()
        text = f.content_string if f.generated_by else Path(f.abs_src_path).read_text()
        for target in _links(text):
            path = _repo_target(f.src_uri, target, docs_dir, root)
            if f.src_uri.startswith(PREFIX + "/"):
                # A published repository page links relative to its repository place.
                path = _from_repo_page(f.src_uri, target, root)
            if path is None or path in wanted or path == "README.md":
                continue
            wanted.add(path)
            new = File.generated(config, f"{PREFIX}/{path}", abs_src_path=str(root / path))
            files.append(new)
            if path.endswith(".md") and path not in seen_md:
                seen_md.add(path)
                queue.append(new)
    return files


def _from_repo_page(src_uri, target, root):
    here = posixpath.dirname(src_uri[len(PREFIX) + 1:])
    joined = posixpath.normpath(posixpath.join(here, target))
    if joined.startswith("..") or not (root / joined).is_file():
        return None
    return joined


def on_page_markdown(markdown, page, config, files):
    docs_dir = Path(config["docs_dir"])
    root = docs_dir.parent
    src = page.file.src_uri

    def rewrite(m):
        target = m.group(2)
        if src.startswith(PREFIX + "/"):
            path = _from_repo_page(src, target, root)
            if path is None:
                return m.group(0)
            if path.startswith("docs/"):
                new = path[len("docs/"):]
            elif path == "README.md":
                new = "index.md"
            else:
                new = f"{PREFIX}/{path}"
        else:
            path = _repo_target(src, target, docs_dir, root)
            if path is None or path == "README.md":
                return m.group(0)
            new = f"{PREFIX}/{path}"
        rel = posixpath.relpath(new, posixpath.dirname(src) or ".")
        return m.group(1) + rel + m.group(3)

    return LINK.sub(rewrite, markdown)
