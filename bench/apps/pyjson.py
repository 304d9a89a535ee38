# SPDX-License-Identifier: MIT
"""CPython's allocation-heavy everyday work: records built as dicts, encoded
to JSON and decoded again, indexed into a dict and sorted.  The allocator
sees CPython's objects of 512 B and less through its own pymalloc, and the
larger ones (big strings, lists and dict tables) directly.

  python3 pyjson.py [RECORDS [100000]]

Prints one line, the same for every allocator and run: a digest of what it
computed, so that a wrong result cannot pass for a fast one."""

import hashlib
import json
import sys

records = int(sys.argv[1]) if len(sys.argv) > 1 else 100000

rows = [{
    "id": i,
    "name": f"user{i * 7919 % records:07d}",
    "email": f"u{i}@example.org",
    "score": (i * 2654435761 % 100000) / 100.0,
    "tags": [f"t{(i + k) % 97}" for k in range(i % 5)],
    "address": {"city": f"city{i % 613}", "zip": f"{i * 31 % 100000:05d}"},
} for i in range(records)]
text = json.dumps(rows)
back = json.loads(text)
by_name = {row["name"]: row for row in back}
cities = {}
for row in back:
    cities.setdefault(row["address"]["city"], []).append(row["score"])
ranked = sorted(back, key=lambda row: (-row["score"], row["name"]))
names = sorted(by_name)
summary = (f"{len(text)} {ranked[0]['id']} {ranked[-1]['id']} {names[len(names) // 2]} {len(cities)} "
           f"{sum(len(v) for v in cities.values())}")
print(f"pyjson records={records} digest={hashlib.sha256(summary.encode()).hexdigest()[:16]}")
