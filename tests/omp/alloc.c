// The memory allocator API: omp_alloc, omp_aligned_alloc, omp_calloc,
// omp_aligned_calloc, omp_realloc and omp_free with omp_default_mem_alloc
// and the default allocator (omp_null_allocator), omp_init_allocator with an
// alignment trait, omp_set/get_default_allocator, many threads at once, and
// the allocate clause.
#include <omp.h>
#include <stdint.h>

#include "omp_check.h"

static int aligned_to(const void* p, size_t a) { return ((uintptr_t)p % a) == 0; }

static void basic(void) {
  CHECK(omp_get_default_allocator() == omp_default_mem_alloc,
        "the default allocator is %lu, not omp_default_mem_alloc",
        (unsigned long)omp_get_default_allocator());
  char* p = omp_alloc(1000, omp_default_mem_alloc);
  CHECK(p != NULL, "omp_alloc(1000) returned NULL");
  memset(p, 0x5a, 1000);
  omp_free(p, omp_default_mem_alloc);

  for (size_t a = 8; a <= 4096; a *= 2) {
    void* q = omp_aligned_alloc(a, 3 * a + 1, omp_default_mem_alloc);
    CHECK(q != NULL && aligned_to(q, a), "omp_aligned_alloc(%zu) gave %p", a, q);
    memset(q, 1, 3 * a + 1);
    omp_free(q, omp_null_allocator);  // null: the allocator that allocated it
  }

  long* z = omp_calloc(257, sizeof(long), omp_default_mem_alloc);
  CHECK(z != NULL, "omp_calloc returned NULL");
  for (int i = 0; i < 257; ++i) CHECK(z[i] == 0, "omp_calloc: element %d is %ld", i, z[i]);
  for (int i = 0; i < 257; ++i) z[i] = i * 3;
  z = omp_realloc(z, 1000 * sizeof(long), omp_default_mem_alloc, omp_default_mem_alloc);
  CHECK(z != NULL, "omp_realloc (growing) returned NULL");
  for (int i = 0; i < 257; ++i) CHECK(z[i] == i * 3, "omp_realloc lost element %d: %ld", i, z[i]);
  z = omp_realloc(z, 10 * sizeof(long), omp_null_allocator, omp_null_allocator);
  CHECK(z != NULL, "omp_realloc (shrinking) returned NULL");
  for (int i = 0; i < 10; ++i) CHECK(z[i] == i * 3, "omp_realloc lost element %d: %ld", i, z[i]);
  CHECK(omp_realloc(z, 0, omp_default_mem_alloc, omp_default_mem_alloc) == NULL,
        "omp_realloc to size 0 did not free");

  void* c = omp_aligned_calloc(256, 10, 100, omp_default_mem_alloc);
  CHECK(c != NULL && aligned_to(c, 256), "omp_aligned_calloc(256) gave %p", c);
  for (int i = 0; i < 1000; ++i) CHECK(((char*)c)[i] == 0, "omp_aligned_calloc: byte %d not 0", i);
  omp_free(c, omp_default_mem_alloc);
  omp_free(NULL, omp_default_mem_alloc);  // allowed: does nothing

  // An allocator of our own: alignment 128 for everything it gives.
  omp_alloctrait_t traits[] = {{omp_atk_alignment, 128}};
  omp_allocator_handle_t mine = omp_init_allocator(omp_default_mem_space, 1, traits);
  CHECK(mine != omp_null_allocator, "omp_init_allocator with an alignment trait failed");
  void* m = omp_alloc(24, mine);
  CHECK(m != NULL && aligned_to(m, 128), "an allocator with alignment 128 gave %p", m);
  omp_set_default_allocator(mine);
  CHECK(omp_get_default_allocator() == mine, "omp_set_default_allocator did not set it");
  void* d = omp_alloc(40, omp_null_allocator);  // the default one: mine
  CHECK(d != NULL && aligned_to(d, 128), "the default allocator (alignment 128) gave %p", d);
  omp_free(d, omp_null_allocator);
  omp_free(m, mine);
  omp_set_default_allocator(omp_default_mem_alloc);
  omp_destroy_allocator(mine);
}

// Many threads allocating and freeing at once; each block keeps its contents.
static void concurrent(void) {
  int bad = 0;
#pragma omp parallel reduction(+ : bad)
  {
    uint64_t rng = 77 + (uint64_t)omp_get_thread_num();
    void* held[64] = {0};
    size_t sizes[64] = {0};
    for (int k = 0; k < OMPT_SIZE(20000, 2000); ++k) {
      int slot = (int)(ompt_random(&rng) % 64);
      if (held[slot] != NULL) {
        unsigned char* b = held[slot];
        for (size_t i = 0; i < sizes[slot]; i += 61) {
          if (b[i] != (unsigned char)(slot + i)) bad++;
        }
        omp_free(held[slot], omp_default_mem_alloc);
        held[slot] = NULL;
      } else {
        size_t size = 1 + ompt_random(&rng) % 3000;
        unsigned char* b = (k & 1) ? omp_aligned_alloc(64, size, omp_default_mem_alloc)
                                   : omp_alloc(size, omp_default_mem_alloc);
        if (b == NULL || ((k & 1) && !aligned_to(b, 64))) {
          bad++;
          continue;
        }
        for (size_t i = 0; i < size; i += 61) b[i] = (unsigned char)(slot + i);
        held[slot] = b;
        sizes[slot] = size;
      }
    }
    for (int s = 0; s < 64; ++s) omp_free(held[s], omp_default_mem_alloc);
  }
  CHECK(bad == 0, "%d blocks were corrupted, misaligned or not given", bad);
}

// The allocate clause: with an allocator that is not a predefined constant
// gcc gets each private copy from GOMP_alloc (and gives it back to
// GOMP_free); an allocator aligning to 128 shows the copies come from it.
static void allocate_clause(void) {
  omp_alloctrait_t traits[] = {{omp_atk_alignment, 128}};
  omp_allocator_handle_t by128 = omp_init_allocator(omp_default_mem_space, 1, traits);
  CHECK(by128 != omp_null_allocator, "omp_init_allocator with an alignment trait failed");
  int bad = 0;
  long arr[16];
  for (int i = 0; i < 16; ++i) arr[i] = i;
  int x = 5;
#pragma omp parallel firstprivate(x, arr) allocate(by128 : x, arr) reduction(+ : bad)
  {
    if (x != 5 || arr[15] != 15) bad++;
    if (!aligned_to(&x, 128) || !aligned_to(arr, 128)) bad++;
    x += omp_get_thread_num();
    arr[0] = -1;
  }
  CHECK(bad == 0, "%d private copies from the allocate clause were misaligned or wrong", bad);
  CHECK(x == 5 && arr[0] == 0, "the allocate clause's private copies changed the original");
  long sum = 0;
#pragma omp parallel for private(x) allocate(by128 : x) reduction(+ : sum, bad)
  for (int i = 0; i < 1000; ++i) {
    x = i;
    sum += x;
    if (!aligned_to(&x, 128)) bad++;
  }
  CHECK(sum == 499500 && bad == 0, "a loop with an allocated private: sum %ld, %d misaligned", sum,
        bad);
  omp_destroy_allocator(by128);
}

int main(void) {
  basic();
  concurrent();
  allocate_clause();
  puts("alloc: ok");
  return 0;
}
