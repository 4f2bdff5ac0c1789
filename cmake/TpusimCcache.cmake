# Use ccache for C++ and CUDA when it is installed; rebuilds of a fresh clone then mostly hit the cache.
find_program(TPUSIM_CCACHE ccache)
if(TPUSIM_CCACHE)
  set(CMAKE_CXX_COMPILER_LAUNCHER ${TPUSIM_CCACHE})
  set(CMAKE_CUDA_COMPILER_LAUNCHER ${TPUSIM_CCACHE})
endif()
