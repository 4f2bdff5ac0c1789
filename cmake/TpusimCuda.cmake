# TPUSIM_WITH_CUDA=auto turns CUDA on when nvcc is found (PATH, CUDACXX or /usr/local/cuda).
# The result is TPUSIM_CUDA_ENABLED; code that needs it sees TPUSIM_HAVE_CUDA=1. Without CUDA,
# TPUSIM_CUDA_OFF_REASON says why (tpusim backends reports it).
set(TPUSIM_CUDA_ENABLED OFF)
set(TPUSIM_CUDA_OFF_REASON "TPUSIM_WITH_CUDA=${TPUSIM_WITH_CUDA} at configure time")
if(TPUSIM_WITH_CUDA STREQUAL "auto" OR TPUSIM_WITH_CUDA)
  if(NOT CMAKE_CUDA_COMPILER)
    find_program(TPUSIM_NVCC nvcc HINTS ENV CUDACXX PATHS /usr/local/cuda/bin)
    if(TPUSIM_NVCC)
      set(CMAKE_CUDA_COMPILER ${TPUSIM_NVCC})
    endif()
  endif()
  if(CMAKE_CUDA_COMPILER)
    if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
      # Hopper (H100/H200) is what the project's device machines have; override on the
      # command line for other GPUs, e.g. -DCMAKE_CUDA_ARCHITECTURES=80.
      set(CMAKE_CUDA_ARCHITECTURES 90)
    endif()
    enable_language(CUDA)
    find_package(CUDAToolkit REQUIRED)
    set(CMAKE_CUDA_STANDARD 17)
    set(CMAKE_CUDA_STANDARD_REQUIRED ON)
    set(TPUSIM_CUDA_ENABLED ON)
  elseif(NOT TPUSIM_WITH_CUDA STREQUAL "auto")
    message(FATAL_ERROR "TPUSIM_WITH_CUDA=ON but nvcc was not found")
  else()
    set(TPUSIM_CUDA_OFF_REASON "nvcc not found at configure time; TPUSIM_WITH_CUDA=auto")
  endif()
endif()
