#!/usr/bin/python3
"""List the functions of crates/*/src/**/*.rs longer than a limit.

A function's length counts its lines from the `fn` line to its closing brace.
Comments, strings and character literals are blanked before braces are matched,
and `#[cfg(test)] mod … { … }` blocks are left out. Exit status 1 when any
function is over the limit, 2 on bad arguments.

Example: bench/long-functions.py --limit 120
"""

import argparse
import pathlib
import re
import sys

FN_NAME = re.compile(r"\bfn\s+([A-Za-z_][A-Za-z0-9_]*)")
TEST_MODULE = re.compile(r"#\[cfg\(test\)\]\s*(?:#\[[^\]]*\]\s*)*(?:pub(?:\([^)]*\))?\s+)?mod\s+\w+\s*\{")


def skip_raw_string(text, start):
    """Index after a raw string starting at `start` (at the `r`), or None if none starts there."""
    hashes = 0
    position = start + 1
    while position < len(text) and text[position] == "#":
        hashes += 1
        position += 1
    if position >= len(text) or text[position] != '"':
        return None
    closing = '"' + "#" * hashes
    end = text.find(closing, position + 1)
    return len(text) if end < 0 else end + len(closing)


def skip_quoted(text, start, quote):
    """Index after a string or character literal opened at `start`, honouring escapes."""
    position = start + 1
    while position < len(text):
        if text[position] == "\\":
            position += 2
        elif text[position] == quote:
            return position + 1
        else:
            position += 1
    return len(text)


def literal_end(text, position):
    """Index after the comment or literal that starts at `position`, or None if none does."""
    char = text[position]
    following = text[position + 1] if position + 1 < len(text) else ""
    if char == "/" and following == "/":
        end = text.find("\n", position)
        return len(text) if end < 0 else end
    if char == "/" and following == "*":
        return skip_block_comment(text, position)
    previous = text[position - 1] if position > 0 else " "
    starts_token = not (previous.isalnum() or previous == "_")
    if char == "b" and starts_token and following in "'\"r":
        if following == "r":
            return skip_raw_string(text, position + 1)
        return skip_quoted(text, position + 1, following)
    if char == "r" and starts_token and following in '#"':
        return skip_raw_string(text, position)
    if char == '"':
        return skip_quoted(text, position, '"')
    if char == "'":
        is_char = following == "\\" or text[position + 2 : position + 3] == "'"
        return skip_quoted(text, position, "'") if is_char else None
    return None


def skip_block_comment(text, start):
    """Index after a (possibly nested) block comment opened at `start`."""
    depth = 0
    position = start
    while position < len(text):
        if text.startswith("/*", position):
            depth += 1
            position += 2
        elif text.startswith("*/", position):
            depth -= 1
            position += 2
            if depth == 0:
                return position
        else:
            position += 1
    return len(text)


def blank_literals(text):
    """The source with comments and literals replaced by spaces, newlines kept."""
    pieces = []
    position = 0
    copied = 0
    while position < len(text):
        end = literal_end(text, position)
        if end is None:
            position += 1
            continue
        pieces.append(text[copied:position])
        pieces.append(re.sub(r"[^\n]", " ", text[position:end]))
        position = copied = end
    pieces.append(text[copied:])
    return "".join(pieces)


def matching_brace(code, opening):
    """Index of the brace closing the one at `opening`."""
    depth = 0
    for position in range(opening, len(code)):
        if code[position] == "{":
            depth += 1
        elif code[position] == "}":
            depth -= 1
            if depth == 0:
                return position
    return len(code) - 1


def body_start(code, after_name):
    """Index of the `{` opening a function's body, or None for a declaration ending in `;`."""
    nesting = 0
    for position in range(after_name, len(code)):
        char = code[position]
        if char in "([":
            nesting += 1
        elif char in ")]":
            nesting -= 1
        elif nesting == 0 and char == ";":
            return None
        elif nesting == 0 and char == "{":
            return position
    return None


def test_ranges(code):
    """(start, end) character ranges of the `#[cfg(test)]` modules."""
    return [(match.start(), matching_brace(code, match.end() - 1)) for match in TEST_MODULE.finditer(code)]


def functions(path):
    """(name, first line, line count) of every function with a body outside test modules."""
    code = blank_literals(path.read_text(encoding="utf-8"))
    excluded = test_ranges(code)
    found = []
    for match in FN_NAME.finditer(code):
        if any(start <= match.start() <= end for start, end in excluded):
            continue
        opening = body_start(code, match.end())
        if opening is None:
            continue
        first_line = code.count("\n", 0, match.start()) + 1
        last_line = code.count("\n", 0, matching_brace(code, opening)) + 1
        found.append((match.group(1), first_line, last_line - first_line + 1))
    return found


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--limit", type=int, default=120, help="longest allowed function, in lines (default 120)")
    parser.add_argument("--root", default=str(pathlib.Path(__file__).resolve().parent.parent), help="workspace root")
    arguments = parser.parse_args()
    root = pathlib.Path(arguments.root)
    if not (root / "crates").is_dir():
        print(f"long-functions: no crates/ folder under {root}", file=sys.stderr)
        return 2
    long_ones = []
    for path in sorted(root.glob("crates/*/src/**/*.rs")):
        for name, line, length in functions(path):
            if length > arguments.limit:
                long_ones.append((length, f"{path.relative_to(root)}:{line}", name))
    for length, location, name in sorted(long_ones, reverse=True):
        print(f"{length:5} {location} {name}")
    if long_ones:
        print(f"{len(long_ones)} function(s) over {arguments.limit} lines", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
