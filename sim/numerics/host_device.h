#pragma once
// TPUSIM_HOST_DEVICE marks a function that both g++ (the simulator, the cpu backend) and nvcc
// (the gpu backend's kernels) compile, so a formula that backends must agree on bit for bit
// has one definition: __host__ __device__ under nvcc, nothing otherwise.

#if defined(__CUDACC__)
#define TPUSIM_HOST_DEVICE __host__ __device__
#else
#define TPUSIM_HOST_DEVICE
#endif
