/* SPDX-License-Identifier: MIT */
/* test-builds: observe */
/* test-not-emulated: qemu-user has no process_vm_readv, through which other threads' caches are read */
/* hakmem only.  The statistics say what the program did: hak_stats_get's
 * figures move by exactly what the test allocates and frees (blocks in use
 * per class, huge blocks), other threads' caches are seen, the OS-call counts
 * are hak_os_stats's, RSS is the kernel's; the text, JSON and CSV forms and
 * the glibc calls (mallinfo2, mallinfo, malloc_stats, malloc_info, mallopt)
 * give hakmem's figures; HAKMEM_STATS and HAKMEM_TINY_FRONT_METRICS print at
 * exit; a thread reading the statistics while others allocate is safe,
 * and so is one on a stack of PTHREAD_STACK_MIN. */
#include "testutil.h"

#include <malloc.h>
#include <semaphore.h>
#include <stdatomic.h>
#include <sys/prctl.h>

static hak_stats_t before, after;

static const hak_class_stats_t *class_of(const hak_stats_t *s, size_t size) {
  for (unsigned i = 0; i < s->nclasses; i++)
    if (s->classes[i].block_size >= size) return &s->classes[i];
  return NULL;
}

static void blocks_in_use(void) {
  enum { N = 1000 };
  static void *p[N];
  hak_stats_get(&before);
  for (int i = 0; i < N; i++) CHECK((p[i] = malloc(200)) != NULL);
  hak_stats_get(&after);
  size_t size = class_of(&after, 200)->block_size;
  printf("  %d blocks of 200 B: class of %zu B, in use %zu -> %zu\n", N, size, class_of(&before, 200)->in_use,
         class_of(&after, 200)->in_use);
  CHECK_EQ(class_of(&after, 200)->in_use - class_of(&before, 200)->in_use, N);
  CHECK(after.in_use_bytes >= before.in_use_bytes + N * size);
  CHECK(after.peak_in_use_bytes >= after.in_use_bytes);
  CHECK(class_of(&after, 200)->slabs > 0 && class_of(&after, 200)->misses > class_of(&before, 200)->misses);
  size_t peak = after.peak_in_use_bytes;
  for (int i = 0; i < N; i++) free(p[i]);
  hak_stats_get(&after);
  CHECK_EQ(class_of(&after, 200)->in_use, class_of(&before, 200)->in_use);
  CHECK(after.peak_in_use_bytes >= peak);  /* a peak never goes down, even below the slow paths' 1 MiB steps */
  CHECK(class_of(&after, 200)->thread_cached > 0);  /* the thread keeps some */
}

static void huge_blocks(void) {
  void *p[5];
  hak_stats_get(&before);
  for (int i = 0; i < 5; i++) CHECK((p[i] = malloc(8 * MiB)) != NULL);
  hak_stats_get(&after);
  printf("  5 blocks of 8 MiB: huge %zu -> %zu blocks, %zu -> %zu MiB\n", before.huge_blocks, after.huge_blocks,
         before.huge_bytes / MiB, after.huge_bytes / MiB);
  CHECK_EQ(after.huge_blocks - before.huge_blocks, 5);
  CHECK_EQ(after.huge_bytes - before.huge_bytes, 5 * 8 * MiB);
  CHECK(after.in_use_bytes >= before.in_use_bytes + 40 * MiB);
  CHECK(after.committed_bytes >= after.huge_bytes);
  CHECK(after.mapped_bytes >= after.committed_bytes);
  for (int i = 0; i < 5; i++) free(p[i]);
  hak_stats_get(&after);
  CHECK_EQ(after.huge_blocks, before.huge_blocks);
}

/* ---- another thread's cache --------------------------------------------- */

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cond = PTHREAD_COND_INITIALIZER;
static int stage;

static void *holder(void *arg) {
  void *p[40];
  for (int i = 0; i < 40; i++) p[i] = malloc(3000);
  for (int i = 0; i < 40; i++) free(p[i]);  /* into this thread's cache */
  pthread_mutex_lock(&lock);
  stage = 1;
  pthread_cond_broadcast(&cond);
  while (stage != 2) pthread_cond_wait(&cond, &lock);
  pthread_mutex_unlock(&lock);
  return arg;
}

static void other_threads_caches(void) {
  pthread_t t;
  hak_stats_get(&before);
  CHECK(pthread_create(&t, NULL, holder, NULL) == 0);
  pthread_mutex_lock(&lock);
  while (stage != 1) pthread_cond_wait(&cond, &lock);
  pthread_mutex_unlock(&lock);
  hak_stats_get(&after);
  const hak_class_stats_t *c = class_of(&after, 3000);
  printf("  a thread holding 40 freed 3000-byte blocks: %u threads, %zu cached, %zu in use\n", after.threads,
         c->thread_cached, c->in_use);
  CHECK_EQ(after.threads, before.threads + 1);
  CHECK(c->thread_cached >= 20 && c->thread_cached - class_of(&before, 3000)->thread_cached <= 40);
  CHECK_EQ(c->in_use, class_of(&before, 3000)->in_use);
  pthread_mutex_lock(&lock);
  stage = 2;
  pthread_cond_broadcast(&cond);
  pthread_mutex_unlock(&lock);
  CHECK(pthread_join(t, NULL) == 0);
  hak_stats_get(&after);
  CHECK_EQ(after.threads, before.threads);
}

/* ---- how much a thread's cache keeps ------------------------------------ */

/* Blocks of `size` in the calling thread's cache (no other thread runs). */
static size_t own_cached(size_t size) {
  hak_stats_get(&after);
  return class_of(&after, size)->thread_cached;
}

static void *new_thread_small_lists(void *arg) {
  void **p = arg;
  for (int i = 0; i < 64; i++) free(p[i]);  /* blocks another thread allocated */
  return (void *)own_cached(4096);
}

/* A new thread's list of a class above 1 KiB starts at a quarter of its
 * capacity: freeing 64 blocks of 4 KiB it did not allocate, it keeps at most
 * 8 of them (the capacity is 32); once it has allocated the class's blocks
 * at a higher rate, the list holds more. */
static void small_lists_start_short(void) {
  void *p[64];
  pthread_t t;
  void *kept;
  for (int i = 0; i < 64; i++) CHECK((p[i] = malloc(4096)) != NULL);
  CHECK(pthread_create(&t, NULL, new_thread_small_lists, p) == 0);
  CHECK(pthread_join(t, &kept) == 0);
  printf("  a new thread freeing 64 blocks of 4 KiB keeps %zu\n", (size_t)kept);
  CHECK((size_t)kept >= 1 && (size_t)kept <= 8);
}

static void large_round(void **p, int n) {
  for (int i = 0; i < n; i++) CHECK((p[i] = malloc(64 * 1024)) != NULL);
  for (int i = 0; i < n; i++) free(p[i]);
}

static void *large_user(void *arg) {
  static void *p[400];
  size_t *kept = arg;
  large_round(p, 100);
  kept[0] = own_cached(64 * 1024);
  for (int r = 0; r < 200; r++) large_round(p, 100);
  kept[1] = own_cached(64 * 1024);
  /* 200 blocks (12.5 MiB): past 4 MiB (64 blocks) the list goes back at
   * every 65th free, 5 kept and 195 misses a round, until 65 536 of them
   * earn the last step, about 260 rounds in */
  for (int r = 0; r < 700; r++) large_round(p, 200);
  kept[2] = own_cached(64 * 1024);
  /* 400 blocks (25 MiB): within the thread's share of the 64 MiB budget
   * (two threads have a cache, this one and the main thread) */
  large_round(p, 400);
  kept[3] = own_cached(64 * 1024);
  return NULL;
}

/* A thread's cache of large blocks starts at 256 KiB and grows with the
 * large blocks it has to take from the SuperSlabs, up to 4 MiB, and to its
 * whole share of the process-wide budget after 65 536 of them: a thread
 * freeing 100 blocks of 64 KiB (6.25 MiB) first keeps at most 4 of them,
 * and after 20 000 such mallocs more, but not all (past 4 MiB, its 65th
 * free sends the list back: 35); freeing 200 (12.5 MiB), it keeps them all
 * once it has missed 65 536 times, and so it does freeing 400 (25 MiB, half
 * of the speed profile's budget). */
static void large_cache_grows(void) {
  size_t kept[4];
  pthread_t t;
  CHECK(pthread_create(&t, NULL, large_user, kept) == 0);
  CHECK(pthread_join(t, NULL) == 0);
  printf("  a thread freeing 100 blocks of 64 KiB keeps %zu at first, %zu after 20 000 mallocs; "
         "freeing 200, %zu after 140 000 more; freeing 400, %zu\n", kept[0], kept[1], kept[2], kept[3]);
  CHECK(kept[0] <= 4);
  CHECK(kept[1] > 4 && kept[1] < 64);
  CHECK_EQ(kept[2], 200);
  CHECK_EQ(kept[3], 400);
}

static void os_figures(void) {
  hak_os_stats_t os;
  hak_stats_get(&after);
  hak_os_stats(&os);
  size_t rss = proc_status_kib("VmRSS") * 1024;
  printf("  resident %zu KiB (VmRSS %zu KiB), mmap %llu\n", after.resident_bytes / 1024, rss / 1024, after.mmap_calls);
  CHECK(after.mmap_calls <= os.mmap_calls && after.mmap_calls > 0);
  CHECK(after.madvise_calls <= os.madvise_calls);
  CHECK(after.resident_bytes > rss / 2 && after.resident_bytes < rss * 2);
}

/* ---- the forms ----------------------------------------------------------- */

static char text[1 << 16];
static size_t text_len;

static void collect(const char *s, void *arg) {
  size_t n = strlen(s);
  (void)arg;
  CHECK(text_len + n < sizeof text);
  memcpy(text + text_len, s, n + 1);
  text_len += n;
}

static void text_and_json(void) {
  void *p = malloc(500);
  text_len = 0;
  hak_stats_print(collect, NULL);
  CHECK(strstr(text, "in use") && strstr(text, "class") && strstr(text, "OS calls"));
  text_len = 0;
  hak_stats_json(collect, NULL);
  CHECK(text[0] == '{' && text[text_len - 2] == '}' && text[text_len - 1] == '\n');
  int depth = 0;
  for (size_t i = 0; i < text_len; i++) depth += (text[i] == '{' || text[i] == '[') - (text[i] == '}' || text[i] == ']');
  CHECK_EQ(depth, 0);
  CHECK(strstr(text, "\"in_use_bytes\":") && strstr(text, "\"classes\":[{\"class\":1,\"block_size\":"));
  free(p);
}

/* A monitoring thread on the smallest stack a thread may have reads
 * them in every form (the snapshot is too big for its stack). */
static void *read_on_small_stack(void *arg) {
  size_t *lengths = arg;
  text_len = 0;
  hak_stats_print(collect, NULL);
  lengths[0] = text_len;
  text_len = 0;
  hak_stats_json(collect, NULL);
  lengths[1] = text_len;
  hak_stats_t *s = malloc(sizeof *s);
  CHECK(s != NULL);
  hak_stats_get(s);
  lengths[2] = s->in_use_bytes;
  free(s);
  /* and glibc's calls: each a snapshot too */
  lengths[3] = mallinfo2().uordblks;
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  CHECK(f != NULL);
  CHECK_EQ(malloc_info(0, f), 0);
  fclose(f);
  lengths[4] = len;
  free(buf);
  int err = dup(2);
  CHECK(err >= 0 && freopen("/dev/null", "w", stderr) != NULL);
  malloc_stats();
  fflush(stderr);
  CHECK(dup2(err, 2) == 2);
  close(err);
  return NULL;
}

static void small_stack(void) {
  pthread_attr_t attr;
  pthread_t t;
  size_t lengths[5] = {0};
  CHECK_EQ(pthread_attr_init(&attr), 0);
  CHECK_EQ(pthread_attr_setstacksize(&attr, PTHREAD_STACK_MIN), 0);
  CHECK_EQ(pthread_create(&t, &attr, read_on_small_stack, lengths), 0);
  CHECK_EQ(pthread_join(t, NULL), 0);
  pthread_attr_destroy(&attr);
  printf("  on a stack of %zu bytes: %zu and %zu bytes of text and JSON, %zu bytes in use\n",
         (size_t)PTHREAD_STACK_MIN, lengths[0], lengths[1], lengths[2]);
  CHECK(lengths[0] > 0 && lengths[1] > 0 && lengths[2] > 0);
  printf("  and mallinfo2: %zu bytes in use; malloc_info: %zu bytes of XML; malloc_stats\n", lengths[3], lengths[4]);
  CHECK(lengths[3] > 0 && lengths[4] > 0);
}

static void glibc_calls(void) {
  void *p[100];
  for (int i = 0; i < 100; i++) p[i] = malloc(700);
  struct mallinfo2 m = mallinfo2();
  hak_stats_get(&after);
  printf("  mallinfo2: arena %zu, uordblks %zu, fordblks %zu, hblks %zu\n", m.arena, m.uordblks, m.fordblks, m.hblks);
  CHECK(m.uordblks >= 100 * 700);
  size_t in_use = m.uordblks + m.hblkhd;  /* as with glibc */
  CHECK(in_use <= after.in_use_bytes + MiB && after.in_use_bytes <= in_use + MiB);
  /* what is free of the arena holds the thread caches' blocks, and what a trim would give back */
  CHECK(m.fordblks >= m.fsmblks && m.fordblks >= m.keepcost);
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
  struct mallinfo old = mallinfo();  /* still called by programs */
#pragma GCC diagnostic pop
  CHECK(old.uordblks > 0 && (size_t)old.uordblks <= m.uordblks + MiB);
  char *buf;
  size_t len;
  FILE *f = open_memstream(&buf, &len);
  CHECK(f && malloc_info(0, f) == 0);
  fclose(f);
  CHECK(strncmp(buf, "<malloc version=\"1\">", 20) == 0 && strstr(buf, "</malloc>"));
  free(buf);
  CHECK_EQ(mallopt(M_ARENA_MAX, 2), 1);
  /* glibc 2.36 takes any threshold (OpenVINO throws where it gets 0), and refuses M_MXFAST past 160 B */
  CHECK_EQ(mallopt(M_MMAP_THRESHOLD, 1 << 20), 1);
  CHECK_EQ(mallopt(M_MMAP_THRESHOLD, (32 << 20) + 1), 1);
  CHECK_EQ(mallopt(M_MMAP_THRESHOLD, 64 << 20), 1);
  CHECK_EQ(mallopt(M_MMAP_THRESHOLD, -1), 1);
  CHECK_EQ(mallopt(M_MXFAST, 160), 1);
  CHECK_EQ(mallopt(M_MXFAST, 161), 0);
  CHECK_EQ(mallopt(M_MXFAST, -1), 0);
  CHECK_EQ(mallopt(12345, 1), 1);
  for (int i = 0; i < 100; i++) free(p[i]);
}

static void *large_blocks_freed(void *arg) {
  void *v[100];
  for (int i = 0; i < 100; i++) v[i] = malloc(100 << 10);
  for (int i = 0; i < 100; i++) free(v[i]);
  hak_thread_flush();
  return arg;
}

/* Memory freed in an arena stays counted when mallopt(M_ARENA_MAX) gives
 * new threads fewer arenas than before. */
static void fewer_arenas(void) {
  CHECK_EQ(mallopt(M_ARENA_MAX, 2), 1);
  for (int i = 0; i < 2; i++) {  /* new threads take the arenas in turn */
    pthread_t t;
    CHECK(pthread_create(&t, NULL, large_blocks_freed, NULL) == 0);
    CHECK(pthread_join(t, NULL) == 0);
  }
  hak_stats_get(&before);
  CHECK_EQ(mallopt(M_ARENA_MAX, 1), 1);
  hak_stats_get(&after);
  printf("  free resident: %zu before, %zu after M_ARENA_MAX 1\n", before.free_resident_bytes,
         after.free_resident_bytes);
  CHECK(before.free_resident_bytes >= 10 * MiB);
  CHECK(after.free_resident_bytes + MiB >= before.free_resident_bytes);
  CHECK_EQ(mallopt(M_ARENA_MAX, 2), 1);
}

/* The peak stays a figure of bytes when a thread gives back more than has
 * been reported taken: blocks one thread took (reported in steps of up to
 * 1 MiB, not all of it yet) freed by another, which exits (and reports
 * it all), then threads that report a little and exit. */
static sem_t taken, may_end;
static void *take_many(void *arg) {
  void **blocks = arg;
  for (int i = 0; i < 1900; i++) blocks[i] = malloc(1000);
  sem_post(&taken);
  sem_wait(&may_end);  /* alive, its own count still pending */
  return NULL;
}

static void *free_all(void *arg) {  /* then exits: all it gave back is reported */
  void **blocks = arg;
  for (int i = 0; i < 1900; i++) free(blocks[i]);
  return NULL;
}

static void *take_one(void *arg) {
  return malloc(1000);  /* kept: the thread reports a little taken as it exits */
}

static void peak_never_wraps_child(void) {
  static void *blocks[1900];
  pthread_t t;
  CHECK(sem_init(&taken, 0, 0) == 0 && sem_init(&may_end, 0, 0) == 0);
  CHECK(pthread_create(&t, NULL, take_many, blocks) == 0);
  sem_wait(&taken);
  pthread_t f;
  CHECK(pthread_create(&f, NULL, free_all, blocks) == 0);
  CHECK(pthread_join(f, NULL) == 0);
  for (int i = 0; i < 8; i++) {
    pthread_t u;
    void *kept;
    CHECK(pthread_create(&u, NULL, take_one, NULL) == 0);
    CHECK(pthread_join(u, &kept) == 0);
    free(kept);
  }
  hak_stats_t s;
  hak_stats_get(&s);
  printf("  peak %zu bytes, in use %zu\n", s.peak_in_use_bytes, s.in_use_bytes);
  CHECK_MSG(s.peak_in_use_bytes < ((size_t)1 << 40), "peak %zu", s.peak_in_use_bytes);
  sem_post(&may_end);
  CHECK(pthread_join(t, NULL) == 0);
}

/* Runs this program again as `name`, with the variable `var` (or none) set:
 * it must exit 0. */
static void run_child_case(const char *name, const char *var) {
  child_result_t res;
  const char *env[] = {var, NULL};
  run_self(name, env, 30, &res);
  CHECK_MSG(WIFEXITED(res.status) && WEXITSTATUS(res.status) == 0, "%s\n%s", describe_status(res.status), res.err);
}

static void peak_never_wraps(void) {  /* in a new process: its counts start at 0 */
  run_child_case("peak", NULL);
}

/* ---- at exit, and while threads run ----------------------------------- */

static void *allocate_some(void *arg) {
  void *p[64];
  for (int i = 0; i < 64; i++) p[i] = malloc(16);
  for (int i = 0; i < 64; i++) free(p[i]);
  return arg;
}

/* Where the slabs_carved field of the 16-B class's row starts, in the CSV that follows `csv`. */
static const char *slabs_carved_of_16(const char *csv) {
  const char *row = strstr(csv, "\n1,16,");
  CHECK_MSG(row != NULL, "%s", csv);
  for (int i = 0; i < 7; i++) row = strchr(row, ',') + 1;
  return row;
}

static void exit_output(void) {
  child_result_t res;
  const char *stats[] = {"HAKMEM_STATS=1", NULL};
  run_self("malloc_stats", stats, 30, &res);
  CHECK_MSG(WIFEXITED(res.status) && WEXITSTATUS(res.status) == 0, "%s", res.err);
  CHECK_MSG(strstr(res.err, "system bytes") && strstr(res.err, "in use") && strstr(res.err, "thread caches"),
            "%s", res.err);
  /* glibc's high-water marks of its mmapped chunks: hakmem's huge blocks, both freed before */
  const char *regions = strstr(res.err, "max mmap regions = "), *bytes = strstr(res.err, "max mmap bytes   = ");
  CHECK_MSG(regions && bytes, "%s", res.err);
  CHECK_EQ(strtoull(regions + 19, NULL, 10), 2);
  CHECK(strtoull(bytes + 19, NULL, 10) >= 8 * MiB);
  const char *front[] = {"HAKMEM_TINY_FRONT_METRICS=1", NULL};
  run_self("allocate", front, 30, &res);
  CHECK(WIFEXITED(res.status) && WEXITSTATUS(res.status) == 0);
  const char *csv = strstr(res.err, "class,block_size,hits,misses,overflows,moved,parked_hits,slabs_carved,"
                                    "from_other_threads\n");
  CHECK_MSG(csv != NULL, "%s", res.err);
  int rows = 0;
  unsigned long long misses = 0;
  for (const char *l = strchr(csv, '\n') + 1; *l >= '0' && *l <= '9'; l = strchr(l, '\n') + 1) {
    const char *f = l;
    for (int i = 0; i < 3; i++) f = strchr(f, ',') + 1;  /* class, block_size, hits */
    misses += strtoull(f, NULL, 10);
    rows++;
  }
  printf("  front metrics: %d rows, %llu misses in all\n", rows, misses);
  CHECK_EQ(rows, HAK_NCLASSES);
  CHECK(misses > 0);
  /* a thread's rows leave slabs_carved empty (slabs are the process's); the process's give it */
  const char *dump[] = {"HAKMEM_TINY_FRONT_DUMP=1", NULL};
  run_self("thread", dump, 30, &res);
  CHECK(WIFEXITED(res.status) && WEXITSTATUS(res.status) == 0);
  const char *thread = strstr(res.err, "front metrics, thread "), *process = strstr(res.err, "front metrics, process");
  CHECK_MSG(thread && process, "%s", res.err);
  CHECK_MSG(*slabs_carved_of_16(thread) == ',', "%s", thread);
  CHECK_MSG(*slabs_carved_of_16(process) >= '0' && *slabs_carved_of_16(process) <= '9', "%s", process);
}

/* A process the kernel gives no huge pages (PR_SET_THP_DISABLE, inherited
 * across exec) counts as resident only what is: blocks of 100 B aligned to
 * 2 MiB in huge regions leave no free units counted beside them. */
static void no_huge_pages_counted_without_them(void) {
  CHECK(prctl(PR_SET_THP_DISABLE, 1, 0, 0, 0) == 0);  /* inherited by the child */
  run_child_case("no_thp", NULL);
  CHECK(prctl(PR_SET_THP_DISABLE, 0, 0, 0, 0) == 0);
}

static void no_thp_child(void) {
  void *p[8];
  for (int i = 0; i < 8; i++) {
    CHECK(posix_memalign(&p[i], 2 * MiB, 100) == 0);
    memset(p[i], 1, 100);
  }
  hak_stats_get(&after);
  printf("  8 blocks aligned to 2 MiB: %zu KiB free and resident, committed %zu KiB\n",
         after.free_resident_bytes / 1024, after.committed_bytes / 1024);
  CHECK(after.free_resident_bytes < MiB);
  for (int i = 0; i < 8; i++) free(p[i]);
}

/* A huge page that a decommit has cut (part of it given back while the rest
 * was in use) is filled 4 KiB at a time after: blocks placed there again,
 * one byte written each, leave no free units counted resident beside them
 * (they were, 30 MiB for 40 blocks, while the process had 2 MiB resident). */
static void cut_pages_child(void) {
  enum { N = 40 };
  void *p[N];
  for (int round = 0; round < 2; round++) {
    for (int i = 0; i < N; i++) {
      CHECK(posix_memalign(&p[i], 2 * MiB, 1250 * 1024) == 0);
      memset(p[i], 1, 1);
    }
    if (round == 1) break;
    malloc_trim(0);  /* gives back the rest of each block's huge page: cuts it */
    for (int i = 0; i < N; i++) free(p[i]);
    malloc_trim(0);
  }
  hak_stats_get(&after);
  printf("  %d blocks again where pages were cut: %zu KiB free and resident, process RSS %zu KiB\n", N,
         after.free_resident_bytes / 1024, after.resident_bytes / 1024);
  CHECK(after.free_resident_bytes < after.resident_bytes);
  for (int i = 0; i < N; i++) free(p[i]);
}

static void no_huge_pages_counted_where_cut(void) { run_child_case("cut_pages", NULL); }

/* With no purge delay, units are given back as they are freed, and the
 * SuperSlabs left empty beyond the warm pool are unmapped at the next tick
 * (they stayed mapped: 108 MiB after 80 MiB of 200 KiB blocks were freed).
 * 36-48 MiB stay: the warm pool, and what the last ticks had not reached. */
static void no_delay_child(void) {
  enum { N = 400, SIZE = 200 * 1024 };
  void *p[N];
  for (int i = 0; i < N; i++) {
    p[i] = malloc(SIZE);
    CHECK(p[i] != NULL);
    memset(p[i], 1, SIZE);
  }
  for (int i = 0; i < N; i++) free(p[i]);
  for (int round = 0; round < 20; round++) {  /* the program goes on */
    for (int i = 0; i < 8; i++) CHECK((p[i] = malloc(SIZE)) != NULL);
    for (int i = 0; i < 8; i++) free(p[i]);
    usleep(2000);
  }
  hak_stats_get(&after);
  printf("  80 MiB freed with no purge delay: %zu MiB mapped after\n", after.mapped_bytes / MiB);
  CHECK(after.mapped_bytes < 64 * MiB);
}

static void empty_superslabs_unmapped_without_delay(void) { run_child_case("no_delay", "HAKMEM_PURGE_DELAY_MS=0"); }

/* malloc_trim leaves nothing resident in the SuperSlabs it keeps mapped
 * (the warm pool) but their headers' first page: where SuperSlabs are on
 * huge pages, their units never used were resident unseen (64 pages of each). */
static void warm_pool_child(void) {
  enum { N = 400, SIZE = 200 * 1024 };
  static void *p[N];
  for (int i = 0; i < N; i++) {
    p[i] = malloc(SIZE);
    CHECK(p[i] != NULL);
    memset(p[i], 1, SIZE);
  }
  for (int i = 0; i < N; i++) free(p[i]);
  malloc_trim(0);
  size_t pages = 0, kept = 0, seen = 0;
  static uintptr_t seen_ss[N];
  for (int i = 0; i < N; i++) {
    uintptr_t ss = (uintptr_t)p[i] & ~(uintptr_t)(4 * MiB - 1);
    static unsigned char vec[4 * MiB / 4096];
    size_t j = 0;
    while (j < seen && seen_ss[j] != ss) j++;
    if (j < seen) continue;
    seen_ss[seen++] = ss;
    if (mincore((void *)ss, 4 * MiB, vec) != 0) continue;  /* unmapped */
    kept++;
    for (size_t k = 1; k < sizeof vec; k++) pages += vec[k] & 1;
  }
  printf("  %zu SuperSlabs still mapped after malloc_trim: %zu pages resident besides their headers\n", kept, pages);
  CHECK(pages <= 16);  /* a few, of those lent a unit since */
}

static void warm_pool_keeps_no_pages(void) { run_child_case("warm_pool", "HAKMEM_WARM_POOL_SIZE=8"); }

/* A thread whose lists of 3000-byte blocks run dry and overflow again and
 * again, and of 20 000-byte ones (a class above 64: the second word of the
 * set of classes a thread's counters hold). */
static void *miss_often(void *arg) {
  static void *p[2000];
  for (int round = 0; round < 20; round++) {
    for (int i = 0; i < 2000; i++) CHECK((p[i] = malloc(round % 5 ? 3000 : 20000)) != NULL);
    for (int i = 0; i < 2000; i++) free(p[i]);
  }
  return arg;
}

static void *idle(void *arg) {  /* a cache, for one block of another class */
  free(opaque_ptr(malloc(16)));
  return arg;
}

/* An exited thread's counters are kept, once: the threads after it start
 * from nothing, in the counters' block it gave back. */
static void exited_threads_counted_once(void) {
  pthread_t t;
  hak_stats_get(&before);
  CHECK(pthread_create(&t, NULL, miss_often, NULL) == 0);
  CHECK(pthread_join(t, NULL) == 0);
  hak_stats_get(&after);
  const hak_class_stats_t *b = class_of(&before, 3000), *a = class_of(&after, 3000);
  size_t misses = a->misses - b->misses, overflows = a->overflows - b->overflows;
  printf("  a thread's 32 000 blocks of 3000 B: %zu misses, %zu overflows\n", misses, overflows);
  CHECK(misses >= 20 && overflows >= 20);
  hak_class_stats_t big = *class_of(&after, 20000);
  CHECK(class_of(&after, 20000) - after.classes >= 64);
  size_t big_moved = big.moved - class_of(&before, 20000)->moved;
  printf("  and 8 000 of 20 000 B: %zu moved\n", big_moved);
  CHECK(big_moved >= 2000);
  for (int i = 0; i < 3; i++) {
    CHECK(pthread_create(&t, NULL, idle, NULL) == 0);
    CHECK(pthread_join(t, NULL) == 0);
  }
  hak_stats_get(&before);
  CHECK_EQ(class_of(&before, 3000)->misses, a->misses);
  CHECK_EQ(class_of(&before, 3000)->overflows, a->overflows);
  CHECK_EQ(class_of(&before, 20000)->moved, big.moved);
  CHECK_EQ(class_of(&before, 20000)->misses, big.misses);
}

static void *blocks_to_free[4];

/* A thread that frees a few blocks of a class into its list, without a
 * miss or an overflow of it, and exits. */
static void *free_few(void *arg) {
  free(opaque_ptr(malloc(16)));  /* a cache */
  for (int i = 0; i < 4; i++) free(blocks_to_free[i]);
  return arg;
}

/* The blocks an exiting thread's lists hand back are counted as moved,
 * once, in a class it neither missed nor overflowed. */
static void exit_drain_counted(void) {
  pthread_t t;
  for (int i = 0; i < 4; i++) CHECK((blocks_to_free[i] = malloc(5000)) != NULL);
  hak_stats_get(&before);
  CHECK(pthread_create(&t, NULL, free_few, NULL) == 0);
  CHECK(pthread_join(t, NULL) == 0);
  hak_stats_get(&after);
  const hak_class_stats_t *b = class_of(&before, 5000), *a = class_of(&after, 5000);
  printf("  a thread's 4 blocks of 5000 B freed, then its exit: %zu moved, %zu misses, %zu overflows\n",
         (size_t)(a->moved - b->moved), (size_t)(a->misses - b->misses), (size_t)(a->overflows - b->overflows));
  CHECK_EQ(a->moved - b->moved, 4);
  CHECK(pthread_create(&t, NULL, idle, NULL) == 0);  /* its counters' block, reused, starts from nothing */
  CHECK(pthread_join(t, NULL) == 0);
  hak_stats_get(&before);
  CHECK_EQ(class_of(&before, 5000)->moved, a->moved);
}

static atomic_int stop;

static void *monitor(void *arg) {
  static hak_stats_t s;
  int n = 0;
  while (!atomic_load(&stop)) {
    hak_stats_get(&s);
    CHECK(s.in_use_bytes < ((size_t)1 << 40));
    n++;
  }
  printf("  %d snapshots while 4 threads allocated\n", n);
  return arg;
}

static void *churn(void *arg) {
  rng_t rng = {(uint64_t)(uintptr_t)arg + 1};
  void *slot[256] = {0};
  for (int i = 0; i < 200000; i++) {
    int k = (int)rng_below(&rng, 256);
    free(slot[k]);
    slot[k] = malloc(rng_size(&rng, 16, 70000));
  }
  for (int k = 0; k < 256; k++) free(slot[k]);
  return NULL;
}

static void snapshots_while_threads_run(void) {
  pthread_t m, t[4];
  CHECK(pthread_create(&m, NULL, monitor, NULL) == 0);
  for (intptr_t i = 0; i < 4; i++) CHECK(pthread_create(&t[i], NULL, churn, (void *)i) == 0);
  for (int i = 0; i < 4; i++) CHECK(pthread_join(t[i], NULL) == 0);
  atomic_store(&stop, 1);
  CHECK(pthread_join(m, NULL) == 0);
}

int main(int argc, char **argv) {
  test_init();
  CHECK_MSG(hakmem_active(), "this test needs hakmem");
  if (argc > 1) {  /* a child of exit_output */
    void *p = malloc(100);
    free(p);
    if (strcmp(argv[1], "no_thp") == 0) no_thp_child();
    if (strcmp(argv[1], "cut_pages") == 0) cut_pages_child();
    if (strcmp(argv[1], "no_delay") == 0) no_delay_child();
    if (strcmp(argv[1], "warm_pool") == 0) warm_pool_child();
    if (strcmp(argv[1], "peak") == 0) peak_never_wraps_child();
    if (strcmp(argv[1], "thread") == 0) {
      pthread_t t;
      CHECK(pthread_create(&t, NULL, allocate_some, NULL) == 0);
      CHECK(pthread_join(t, NULL) == 0);
    }
    if (strcmp(argv[1], "malloc_stats") == 0) {
      void *huge[2] = {malloc(3 * MiB), malloc(5 * MiB)};
      CHECK(huge[0] && huge[1]);
      free(huge[0]);
      free(huge[1]);
      malloc_stats();
    }
    return 0;
  }
  RUN(blocks_in_use);
  RUN(huge_blocks);
  RUN(other_threads_caches);
  RUN(exited_threads_counted_once);
  RUN(exit_drain_counted);
  RUN(small_lists_start_short);
  RUN(large_cache_grows);
  RUN(os_figures);
  RUN(text_and_json);
  RUN(small_stack);
  RUN(glibc_calls);
  RUN(fewer_arenas);
  RUN(peak_never_wraps);
  RUN(exit_output);
  RUN(no_huge_pages_counted_without_them);
  RUN(no_huge_pages_counted_where_cut);
  RUN(empty_superslabs_unmapped_without_delay);
  RUN(warm_pool_keeps_no_pages);
  RUN(snapshots_while_threads_run);
  return 0;
}
