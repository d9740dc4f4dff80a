// omp_realloc against allocators with a pool (omp_atk_pool_size): a block
// that grows or shrinks in its own pool counts once (3000 bytes of a
// 4096-byte pool grow to 3001), a failed growth leaves the old block as it
// was, a block moved to another allocator gives its bytes back to its old
// pool; free_allocator other than the block's allocator, size 0, a null
// pointer, and each fallback trait (null_fb, default_mem_fb, allocator_fb);
// alignment kept. What a pool holds is read through what it can still
// give: every size below leaves room for the headers an implementation
// puts in front of a block (GNU's and mote's take 32 bytes, up to 64 more
// for alignment).
#include <omp.h>
#include <stdint.h>

#include "omp_check.h"

enum { kPool = 4096 };

static void fill(void* p, size_t n, unsigned char seed) {
  for (size_t i = 0; i < n; ++i) ((unsigned char*)p)[i] = (unsigned char)(seed + i * 7);
}

static void expect_filled(const void* p, size_t n, unsigned char seed, const char* what) {
  for (size_t i = 0; i < n; ++i) {
    CHECK(((const unsigned char*)p)[i] == (unsigned char)(seed + i * 7), "%s: byte %zu changed", what, i);
  }
}

static omp_allocator_handle_t pool(omp_uintptr_t fallback, omp_uintptr_t fb_data, omp_uintptr_t alignment) {
  omp_alloctrait_t traits[] = {{omp_atk_pool_size, kPool},
                               {omp_atk_fallback, fallback},
                               {omp_atk_fb_data, fb_data},
                               {omp_atk_alignment, alignment}};
  omp_allocator_handle_t a = omp_init_allocator(omp_default_mem_space, 4, traits);
  CHECK(a != omp_null_allocator, "omp_init_allocator with a pool of %d bytes failed", kPool);
  return a;
}

// Can `a` give `n` bytes now? (Given back at once.)
static int has_room(omp_allocator_handle_t a, size_t n) {
  void* p = omp_alloc(n, a);
  if (p == NULL) return 0;
  omp_free(p, a);
  return 1;
}

// A block growing and shrinking in its own pool counts once.
static void in_place(void) {
  omp_allocator_handle_t a = pool(omp_atv_null_fb, 0, 1);
  char* p = omp_alloc(3000, a);
  CHECK(p != NULL, "omp_alloc(3000) from a pool of %d", kPool);
  fill(p, 3000, 1);
  p = omp_realloc(p, 3001, a, a);
  CHECK(p != NULL, "omp_realloc(3000 -> 3001) in a pool of %d bytes returned NULL", kPool);
  expect_filled(p, 3000, 1, "realloc 3000 -> 3001");
  p[3000] = 42;
  // free_allocator null: the block's own allocator.
  p = omp_realloc(p, 3500, omp_null_allocator, omp_null_allocator);
  CHECK(p != NULL, "omp_realloc(3001 -> 3500, null allocators) in its pool returned NULL");
  expect_filled(p, 3000, 1, "realloc 3001 -> 3500");
  CHECK(p[3000] == 42, "realloc 3001 -> 3500: byte 3000 changed");
  CHECK(!has_room(a, 1000), "a pool of %d holding 3500 bytes gave 1000 more", kPool);
  p = omp_realloc(p, 100, a, a);
  CHECK(p != NULL, "omp_realloc(3500 -> 100) returned NULL");
  expect_filled(p, 100, 1, "realloc 3500 -> 100");
  CHECK(has_room(a, 3000), "a pool of %d holding 100 bytes refused 3000 more", kPool);
  omp_free(p, a);
  CHECK(has_room(a, 3900), "an empty pool of %d refused 3900 bytes", kPool);
  omp_destroy_allocator(a);
}

// Growth the pool cannot hold, with null_fb: NULL, and the old block stays,
// counted, with its contents.
static void failed_growth(void) {
  omp_allocator_handle_t a = pool(omp_atv_null_fb, 0, 1);
  char* p = omp_alloc(3000, a);
  CHECK(p != NULL, "omp_alloc(3000) from a pool of %d", kPool);
  fill(p, 3000, 2);
  CHECK(omp_realloc(p, 5000, a, a) == NULL, "omp_realloc(5000) in a pool of %d did not fail", kPool);
  expect_filled(p, 3000, 2, "a failed realloc");
  CHECK(!has_room(a, 1500), "after a failed realloc the old block is no longer counted");
  omp_free(p, a);
  CHECK(has_room(a, 3900), "an empty pool of %d refused 3900 bytes", kPool);
  omp_destroy_allocator(a);
}

// A block moved out of its pool gives its bytes back; one moved in counts.
static void other_allocator(void) {
  omp_allocator_handle_t a = pool(omp_atv_null_fb, 0, 1);
  char* p = omp_alloc(3000, a);
  CHECK(p != NULL, "omp_alloc(3000) from a pool of %d", kPool);
  fill(p, 3000, 3);
  p = omp_realloc(p, 3500, omp_default_mem_alloc, a);
  CHECK(p != NULL, "omp_realloc from a pool into omp_default_mem_alloc returned NULL");
  expect_filled(p, 3000, 3, "realloc out of the pool");
  CHECK(has_room(a, 3900), "the pool still counts a block moved out of it");
  p = omp_realloc(p, 3000, a, omp_default_mem_alloc);
  CHECK(p != NULL, "omp_realloc from omp_default_mem_alloc into a pool returned NULL");
  expect_filled(p, 3000, 3, "realloc into the pool");
  CHECK(!has_room(a, 2000), "the pool does not count a block moved into it");
  // free_allocator names the block's allocator; allocator null keeps it.
  p = omp_realloc(p, 3002, omp_null_allocator, a);
  CHECK(p != NULL, "omp_realloc(3000 -> 3002, allocator null) returned NULL");
  expect_filled(p, 3000, 3, "realloc with allocator null");
  CHECK(!has_room(a, 2000), "a block reallocated with allocator null left its pool");
  omp_free(p, omp_null_allocator);
  CHECK(has_room(a, 3900), "an empty pool of %d refused 3900 bytes", kPool);
  omp_destroy_allocator(a);
}

// Size 0 frees; a null pointer allocates.
static void edges(void) {
  omp_allocator_handle_t a = pool(omp_atv_null_fb, 0, 1);
  void* p = omp_alloc(3000, a);
  CHECK(p != NULL, "omp_alloc(3000) from a pool of %d", kPool);
  CHECK(omp_realloc(p, 0, a, a) == NULL, "omp_realloc(p, 0) did not return NULL");
  CHECK(has_room(a, 3900), "omp_realloc(p, 0) did not give the block back to its pool");
  p = omp_realloc(NULL, 3000, a, omp_null_allocator);
  CHECK(p != NULL, "omp_realloc(NULL, 3000) from a pool of %d returned NULL", kPool);
  fill(p, 3000, 4);
  CHECK(!has_room(a, 2000), "omp_realloc(NULL, 3000) did not count its block in the pool");
  CHECK(omp_realloc(NULL, 0, a, a) == NULL, "omp_realloc(NULL, 0) did not return NULL");
  CHECK(omp_realloc(NULL, 5000, a, a) == NULL, "omp_realloc(NULL, 5000) in a pool of %d did not fail", kPool);
  expect_filled(p, 3000, 4, "the pool's block");
  omp_free(p, a);
  omp_destroy_allocator(a);
}

// The fallback traits when the pool cannot hold the new size.
static void fallbacks(void) {
  // default_mem_fb: the default memory takes it.
  omp_allocator_handle_t d = pool(omp_atv_default_mem_fb, 0, 1);
  char* p = omp_alloc(3000, d);
  CHECK(p != NULL, "omp_alloc(3000) from a pool of %d", kPool);
  fill(p, 3000, 5);
  p = omp_realloc(p, 5000, d, d);
  CHECK(p != NULL, "omp_realloc(5000) with default_mem_fb returned NULL");
  expect_filled(p, 3000, 5, "realloc to the default memory");
  p[4999] = 9;
  omp_free(p, d);
  omp_destroy_allocator(d);

  // allocator_fb: the fb_data allocator (another pool, null_fb) takes it.
  omp_allocator_handle_t a = pool(omp_atv_null_fb, 0, 1);
  omp_allocator_handle_t c = pool(omp_atv_allocator_fb, (omp_uintptr_t)a, 1);
  p = omp_alloc(3000, c);
  CHECK(p != NULL, "omp_alloc(3000) from a pool of %d", kPool);
  fill(p, 3000, 6);
  void* q = omp_alloc(1000, c);
  CHECK(q != NULL, "omp_alloc(1000) from a pool of %d holding 3000", kPool);
  // 100 more bytes do not fit in c: the block moves to a.
  p = omp_realloc(p, 3100, c, c);
  CHECK(p != NULL, "omp_realloc(3100) with allocator_fb returned NULL");
  expect_filled(p, 3000, 6, "realloc to the fallback allocator");
  CHECK(!has_room(a, 2000), "the fallback allocator's pool does not count the moved block");
  CHECK(has_room(c, 2500), "the first pool still counts the block moved out of it");
  // Too big for both: NULL, and the block stays where it is.
  CHECK(omp_realloc(p, 6000, c, c) == NULL, "omp_realloc(6000) fitting in no pool did not fail");
  expect_filled(p, 3000, 6, "a failed realloc");
  omp_free(p, omp_null_allocator);
  omp_free(q, c);
  CHECK(has_room(a, 3900) && has_room(c, 3900), "the pools are not empty after every block was freed");
  omp_destroy_allocator(c);
  omp_destroy_allocator(a);
}

// An aligned pool: the new block is aligned too; two blocks that do not fit
// together are refused.
static void aligned(void) {
  omp_allocator_handle_t a = pool(omp_atv_null_fb, 0, 64);
  int* p = omp_alloc(sizeof(int), a);
  CHECK(p != NULL && (uintptr_t)p % 64 == 0, "an allocator with alignment 64 gave %p", (void*)p);
  p[0] = 7;
  p = omp_realloc(p, 3072, a, a);
  CHECK(p != NULL && (uintptr_t)p % 64 == 0, "omp_realloc(3072) with alignment 64 gave %p", (void*)p);
  CHECK(p[0] == 7, "omp_realloc with alignment 64 lost the first int");
  int* q = omp_alloc(sizeof(int), a);
  CHECK(q != NULL, "omp_alloc(4) with alignment 64 next to 3072 bytes");
  CHECK(omp_realloc(q, 3072, a, a) == NULL, "two blocks of 3072 bytes in a pool of %d", kPool);
  omp_free(p, a);
  omp_free(q, a);
  omp_destroy_allocator(a);
}

int main(void) {
  in_place();
  failed_growth();
  other_allocator();
  edges();
  fallbacks();
  aligned();
  // The same from every thread of a team, each with its own pools.
#pragma omp parallel
  {
    for (int round = 0; round < 20; ++round) {
      in_place();
      other_allocator();
    }
  }
  return 0;
}
