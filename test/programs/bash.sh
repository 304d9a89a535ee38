#!/bin/sh
# SPDX-License-Identifier: MIT
# test-needs: bash
# bash -c with hakmem preloaded: loops filling indexed and associative arrays,
# string building and splitting, command substitution and pipelines (child
# processes inherit the preload).  The results are checked against values
# computed independently, and against a run without hakmem.
# shellcheck source-path=SCRIPTDIR source=../lib/common.sh
. "$(dirname "$0")/../lib/common.sh"

cat > "$work/work.sh" <<'SH'
declare -A h
a=()
for i in $(seq 1 20000); do a+=("item$i"); h["k$i"]=$((i * i)); done
s=0
for k in "${!h[@]}"; do s=$((s + h[$k])); done
str=""
for i in $(seq 1 3000); do str+="x$i,"; done
IFS=, read -ra parts <<< "$str"
unset 'a[5]' 'h[k5]'
sub=$(for i in 1 2 3 4 5; do echo "line $i"; done | tr a-z A-Z | sort -r | head -3)
echo "${#a[@]} ${a[19999]} ${#h[@]} $s ${#str} ${#parts[@]}"
echo "$sub"
if grep -q libhakmem /proc/$$/maps; then echo hakmem; else echo "no hakmem"; fi
SH

script=$(cat "$work/work.sh")
bash -c "$script" > "$work/ref"
hak bash -c "$script" > "$work/hak"
grep -qx hakmem "$work/hak" || { echo "bash ran without hakmem"; exit 1; }
head -4 "$work/ref" > "$work/ref4"
head -4 "$work/hak" > "$work/hak4"
same "$work/hak4" "$work/ref4" "bash"
# sum of i*i for i = 1..20000; the length of "x1,x2,...,x3000,"
expected="19999 item20000 19999 $((20000 * 20001 * 40001 / 6)) 16893 3000"
[ "$(head -1 "$work/hak")" = "$expected" ] ||
  { echo "bash computed \"$(head -1 "$work/hak")\", expected \"$expected\""; exit 1; }
echo "$expected"
