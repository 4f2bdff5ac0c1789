#pragma once
// Process-wide malloc settings for the programs that run a host input pipeline (the tpusim CLI,
// the data benchmarks). Call once at the top of main(); never from a library.

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace tpusim {

// By default glibc hands memory at the top of its heap back to the kernel once more than twice
// the largest recent block is free, and serves large blocks by mmap. A pipeline that builds and
// frees a multi-MiB batch every step then faults every page of every batch in afresh: batching
// 1024 Fashion-MNIST examples took about 1,700 page faults and 14x the CPU time of the same
// batch in memory kept for reuse (bench/README.md, BM_Batch). Keeping up to 256 MiB of freed
// memory and serving blocks up to 32 MiB (glibc's largest mmap threshold) from the heap makes
// the host model's measured stage costs those of a pipeline in steady state.
inline void keep_freed_memory_for_reuse() {
#if defined(__GLIBC__)
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  mallopt(M_TRIM_THRESHOLD, 256 << 20);
#endif
}

}  // namespace tpusim
