#!/bin/sh
# SPDX-License-Identifier: MIT
# test-needs: python3
# python3 with hakmem preloaded: dicts, lists, strings, JSON and a large
# buffer, once with Python's own small-object allocator and once with every
# allocation going to malloc (PYTHONMALLOC=malloc).  The script checks its
# results itself, and prints digests compared with a run without hakmem.
# shellcheck source-path=SCRIPTDIR source=../lib/common.sh
. "$(dirname "$0")/../lib/common.sh"

cat > "$work/work.py" <<'PY'
import hashlib, json, random, sys
random.seed(7)
d = {}
for i in range(100000):
    d["k%d" % i] = [i, str(i) * (i % 7), {"x": i * 2}]
ordered = sorted(d.items(), key=lambda kv: (kv[1][0] % 1000, kv[0]))
s = "".join(str(v[0]) for k, v in ordered[:50000])
words = [("w%d" % random.randrange(100000)) * random.randrange(1, 5) for _ in range(100000)]
counts = {}
for w in words:
    counts[w] = counts.get(w, 0) + 1
blob = json.dumps(d, sort_keys=True)
back = json.loads(blob)
assert back == {k: [v[0], v[1], {"x": v[2]["x"]}] for k, v in d.items()}
assert len(d) == 100000 and sum(counts.values()) == 100000
del d, back, ordered
big = bytearray(48 * 1024 * 1024)
big[-1] = 1
assert sum(big[-4096:]) == 1
print(hashlib.sha256(blob.encode()).hexdigest(), hashlib.sha256(s.encode()).hexdigest(),
      len(counts), sum(len(w) for w in words))
print("hakmem" if "libhakmem" in open("/proc/self/maps").read() else "no hakmem")
PY

python3 "$work/work.py" > "$work/ref"
hak python3 "$work/work.py" > "$work/hak"
PYTHONMALLOC=malloc hak python3 "$work/work.py" > "$work/hak-malloc"

grep -qx "no hakmem" "$work/ref"
grep -qx hakmem "$work/hak" || { echo "python3 ran without hakmem"; exit 1; }
head -1 "$work/ref" > "$work/ref1"
head -1 "$work/hak" > "$work/hak1"
head -1 "$work/hak-malloc" > "$work/hak-malloc1"
same "$work/hak1" "$work/ref1" "python3"
same "$work/hak-malloc1" "$work/ref1" "python3 with PYTHONMALLOC=malloc"
cat "$work/hak1"
