#!/bin/sh
# SPDX-License-Identifier: MIT
# test-needs: sqlite3
# test-timeout: 180
# test-timeout-full: 900
# sqlite3 (Debian's command-line shell; its library allocates with malloc)
# with hakmem preloaded builds a database of three tables and three indexes,
# 100 000 order rows (a million with HAKMEM_TEST_SIZE=full), with a 100 MB
# page cache in the heap; queries it (aggregates, a join, group by, a large
# group_concat), updates and deletes rows, vacuums it, and checks it with
# PRAGMA integrity_check.  Everything it prints, and the database file
# itself, must equal those of the same run without hakmem; the database
# hakmem's run wrote is then checked again without hakmem.
# shellcheck source-path=SCRIPTDIR source=../lib/common.sh
. "$(dirname "$0")/../lib/common.sh"

rows=100000
[ "${HAKMEM_TEST_SIZE:-quick}" = full ] && rows=1000000
customers=$((rows / 10))

cat > "$work/build.sql" <<SQL
PRAGMA cache_size = -100000;
CREATE TABLE customers(id INTEGER PRIMARY KEY, name TEXT, city TEXT, score REAL);
CREATE TABLE orders(id INTEGER PRIMARY KEY, customer INTEGER, amount INTEGER, note TEXT);
CREATE TABLE tags(order_id INTEGER, tag TEXT);
BEGIN;
WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < $customers)
  INSERT INTO customers SELECT i, 'customer ' || i, 'city' || (i % 97), (i * 7919 % 1000) / 10.0 FROM n;
WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < $rows)
  INSERT INTO orders SELECT i, 1 + (i * 31337 % $customers), i * 7 % 10007,
                            printf('%d:%.*c', i, i % 300, 'x') FROM n;
WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < $rows / 2)
  INSERT INTO tags SELECT i * 2, 'tag' || (i * i % 1009) FROM n;
COMMIT;
CREATE INDEX orders_customer ON orders(customer);
CREATE INDEX orders_amount ON orders(amount, note);
CREATE INDEX tags_tag ON tags(tag, order_id);
SELECT count(*), sum(amount), max(length(note)), sum(length(note)) FROM orders;
SELECT city, count(*), round(avg(score), 3) FROM customers GROUP BY city ORDER BY city LIMIT 20;
SELECT c.city, count(*), sum(o.amount) FROM orders o JOIN customers c ON c.id = o.customer
  GROUP BY c.city ORDER BY 3 DESC, 1 LIMIT 10;
SELECT t.tag, count(*), sum(o.amount) FROM tags t JOIN orders o ON o.id = t.order_id
  GROUP BY t.tag ORDER BY 2 DESC, 1 LIMIT 10;
SELECT group_concat(id) FROM (SELECT id FROM orders WHERE amount BETWEEN 100 AND 103 ORDER BY id LIMIT 40);
SELECT length(group_concat(note, '|')), count(DISTINCT customer) FROM orders WHERE id % 7 = 1;
UPDATE orders SET note = note || note WHERE id % 3 = 0;
DELETE FROM orders WHERE id % 5 = 0;
DELETE FROM tags WHERE tag LIKE 'tag1%';
SELECT count(*), sum(amount), sum(length(note)) FROM orders;
SELECT count(*) FROM tags;
VACUUM;
PRAGMA integrity_check;
SQL

sqlite3 "$work/ref.db" < "$work/build.sql" > "$work/ref.out"
hak sqlite3 "$work/hak.db" < "$work/build.sql" > "$work/hak.out"
same "$work/hak.out" "$work/ref.out" "sqlite3"
[ "$(tail -1 "$work/hak.out")" = ok ] || { echo "PRAGMA integrity_check: $(tail -1 "$work/hak.out")"; exit 1; }
cmp -s "$work/hak.db" "$work/ref.db" || { echo "the database files differ"; exit 1; }
check=$(sqlite3 "$work/hak.db" "PRAGMA integrity_check; SELECT count(*) FROM orders;" | paste -sd' ')
[ "$check" = "ok $((rows - rows / 5))" ] || { echo "hakmem's database, reopened: $check"; exit 1; }
echo "$rows orders: output ($(wc -l < "$work/hak.out") lines) and database ($(wc -c < "$work/hak.db") bytes) identical"
