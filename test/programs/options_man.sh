#!/bin/sh
# SPDX-License-Identifier: MIT
# scripts/options_man.py, which makes the ENVIRONMENT section of hakmem(3)
# from the README's options table: a table with more columns than three,
# markdown and characters roff would take for its own, a page that renders
# without warnings; and errors for a README without a usable table.
# shellcheck source-path=SCRIPTDIR source=../lib/common.sh
. "$(dirname "$0")/../lib/common.sh"

root=$(cd "$(dirname "$0")/../.." && pwd)
fail() { echo "$*"; exit 1; }

cat > "$work/README.md" <<'MD'
# x

| not | the | options |
|---|---|---|
| `NOT_THIS` | 1 | a table outside the markers |

<!-- options:begin -->
| variable | default | values | meaning |
|---|:---:|---|---|
| `HAKMEM_ONE` | 4 | 0–1024 | **bold**, *italic*, `code-with-dashes`, a \| pipe, C:\path… |
| HAKMEM_TWO | `speed` |  | .starts with a dot, see [the docs](https://example.org) |
<!-- options:end -->
MD

python3 "$root/scripts/options_man.py" "$work/README.md" > "$work/env.roff" || fail "options_man.py failed"
cat > "$work/expected" <<'ROFF'
.TP
\fBHAKMEM_ONE\fR (default: 4)
\fBbold\fR, \fIitalic\fR, \fBcode\-with\-dashes\fR, a | pipe, C:\epath...
.br
values: 0\(en1024
.TP
\fBHAKMEM_TWO\fR (default: \fBspeed\fR)
\&.starts with a dot, see the docs
ROFF
cmp -s "$work/env.roff" "$work/expected" || { diff "$work/expected" "$work/env.roff"; fail "unexpected roff"; }

# In a page: the template's @OPTIONS@ line is replaced, the rest kept.
printf '.TH T 3\n.SH NAME\nt \\- test\n.SH ENVIRONMENT\n@OPTIONS@\n.SH SEE ALSO\n.BR hakmem (3)\n' > "$work/t.3.in"
python3 "$root/scripts/options_man.py" "$work/README.md" "$work/t.3.in" > "$work/t.3" || fail "options_man.py with a template failed"
grep -q '@OPTIONS@' "$work/t.3" && fail "@OPTIONS@ left in the page"
grep -q '^\.SH SEE ALSO$' "$work/t.3" || fail "the template's end was lost"
MANWIDTH=80 man --warnings -l "$work/t.3" > "$work/t.txt" 2> "$work/warnings" || fail "man cannot render the page"
[ ! -s "$work/warnings" ] || { cat "$work/warnings"; fail "man warns about the page"; }
grep -q 'HAKMEM_ONE (default: 4)' "$work/t.txt" && grep -q 'values: 0-1024' "$work/t.txt" ||
  { cat "$work/t.txt"; fail "the rendered page lacks the options"; }

# What it refuses, with a message and status 1.
refuse() { # refuse WHY: the README in $work/bad.md must be refused
  if python3 "$root/scripts/options_man.py" "$work/bad.md" > /dev/null 2> "$work/err"; then
    fail "options_man.py accepted a README with $1"
  fi
  grep -q '^options_man.py: ' "$work/err" || fail "no message for a README with $1"
}
sed '/options:begin/d' "$work/README.md" > "$work/bad.md"
refuse "no begin marker"
printf '<!-- options:begin -->\n| variable | meaning |\n|---|---|\n| `A` | b |\n<!-- options:end -->\n' > "$work/bad.md"
refuse "two columns"
printf '<!-- options:begin -->\n| variable | default | meaning |\n|---|---|---|\n| `A` | 1 |\n<!-- options:end -->\n' > "$work/bad.md"
refuse "a short row"
printf '<!-- options:begin -->\n<!-- options:end -->\n' > "$work/bad.md"
refuse "no table"

echo "options table to roff: 4 columns, markdown, escapes, errors"
