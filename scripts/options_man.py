#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Writes the options table of the README as the roff of a man page.

    scripts/options_man.py README [TEMPLATE]

Reads the markdown table between the lines <!-- options:begin --> and
<!-- options:end --> of README: a header row, then one row per environment
variable, with the variable in the first column, its default in the second
and its meaning in the last; the columns between, if any, are kept as
"header: value" lines.  Prints one .TP paragraph per variable, or, given
TEMPLATE, the template with its line @OPTIONS@ replaced by them (how
hakmem.3 is made, so that the man page says what the README says).
"""

import re
import sys

BEGIN, END = "<!-- options:begin -->", "<!-- options:end -->"
PLACEHOLDER = "@OPTIONS@"

# Markdown inline syntax: `code`, **bold**, *italic* or _italic_, [text](url).
INLINE = re.compile(r"`([^`]+)`|\*\*(.+?)\*\*|\*([^*\s][^*]*?)\*|\b_([^_]+)_\b|\[([^\]]+)\]\([^)]*\)")


class TableError(Exception):
    pass


# Characters that groff draws on every device, ASCII terminals included;
# others are written as \[uXXXX].
GLYPHS = {
    "\u2026": "...", "\u2013": "\\(en", "\u2014": "\\(em", "\u00d7": "\\(mu", "\u2192": "\\(->",
    "\u2190": "\\(<-", "\u2264": "\\(<=", "\u2265": "\\(>=", "\u00b1": "\\(+-", "\u2018": "\\(oq",
    "\u2019": "\\(cq", "\u201c": "\\(lq", "\u201d": "\\(rq", "\u00a0": "\\ ",
}


def roff_text(text, literal=False):
    """Text as roff: backslashes and non-ASCII characters escaped and, in
    literal text (a variable, a value), hyphens written as ASCII minus signs."""
    out = []
    for c in text:
        if c == "\\":
            out.append("\\e")
        elif c == "-" and literal:
            out.append("\\-")
        else:
            out.append(c if ord(c) < 128 else GLYPHS.get(c, f"\\[u{ord(c):04X}]"))
    return "".join(out)


def roff_inline(md):
    """One markdown table cell as roff."""
    out, pos = [], 0
    for m in INLINE.finditer(md):
        out.append(roff_text(md[pos:m.start()]))
        code, bold, italic, italic2, link = m.groups()
        if code is not None:
            out.append(f"\\fB{roff_text(code, literal=True)}\\fR")
        elif bold is not None:
            out.append(f"\\fB{roff_inline(bold)}\\fR")
        elif italic is not None or italic2 is not None:
            out.append(f"\\fI{roff_inline(italic or italic2)}\\fR")
        else:
            out.append(roff_inline(link))
        pos = m.end()
    out.append(roff_text(md[pos:]))
    return "".join(out)


def line(text):
    """A roff text line: one that would start with a control character is
    protected with \\&."""
    return "\\&" + text if text[:1] in (".", "'") else text


def cells(row):
    """The cells of a markdown table row; \\| is a | inside a cell."""
    row = row.strip()
    if row.startswith("|"):
        row = row[1:]
    if row.endswith("|") and not row.endswith("\\|"):
        row = row[:-1]
    return [c.strip().replace("\\|", "|") for c in re.split(r"(?<!\\)\|", row)]


def options_table(readme_text):
    """(header, rows) of the table between the markers."""
    lines = readme_text.splitlines()
    try:
        start = lines.index(BEGIN)
        end = lines.index(END, start)
    except ValueError:
        raise TableError(f"no {BEGIN} ... {END} section") from None
    rows = [cells(l) for l in lines[start + 1:end] if l.strip().startswith("|")]
    if len(rows) < 2 or not all(re.fullmatch(r":?-+:?", c) for c in rows[1]):
        raise TableError("the options section holds no markdown table")
    header, body = rows[0], rows[2:]
    if len(header) < 3:
        raise TableError(f"the options table has {len(header)} columns; it needs variable, default and meaning")
    for row in body:
        if len(row) != len(header):
            raise TableError(f"row {'|'.join(row)!r} has {len(row)} cells, the header {len(header)}")
    if not body:
        raise TableError("the options table has no rows")
    return header, body


def environment_roff(header, rows):
    """One .TP paragraph per option."""
    out = []
    for row in rows:
        variable, default, meaning = row[0].strip("`"), row[1], row[-1]
        tag = f"\\fB{roff_text(variable, literal=True)}\\fR"
        if default:
            tag += f" (default: {roff_inline(default)})"
        out += [".TP", line(tag), line(roff_inline(meaning))]
        for name, value in zip(header[2:-1], row[2:-1]):
            if value:
                out += [".br", line(f"{roff_inline(name)}: {roff_inline(value)}")]
    return "\n".join(out) + "\n"


def main(argv):
    if len(argv) not in (2, 3):
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    readme = argv[1]
    try:
        with open(readme, encoding="utf-8") as f:
            roff = environment_roff(*options_table(f.read()))
    except (OSError, TableError) as e:
        print(f"options_man.py: {readme}: {e}", file=sys.stderr)
        return 1
    if len(argv) == 2:
        sys.stdout.write(roff)
        return 0
    with open(argv[2], encoding="utf-8") as f:
        template = f.read().splitlines(keepends=True)
    if sum(l.strip() == PLACEHOLDER for l in template) != 1:
        print(f"options_man.py: {argv[2]}: expected one line {PLACEHOLDER}", file=sys.stderr)
        return 1
    sys.stdout.write("".join(roff if l.strip() == PLACEHOLDER else l for l in template))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
