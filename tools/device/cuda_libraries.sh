# Sourced by the device-call scripts: finds where the lent machine keeps cuBLAS and the driver's
# libcuda (the bundle carries neither) and exports their folders as TPUSIM_LIBRARY_PATH, which
# the bundle's run script adds to the loader's path.

# The first folder under the given roots that holds NAME, or nothing.
folder_of() {
  local name=$1
  shift
  find "$@" -name "$name" \( -type f -o -type l \) -print -quit 2>/dev/null | xargs -r dirname
}

cublas=$(folder_of 'libcublas.so.13' /usr/local/cuda/lib64 /usr/local/cuda/targets /usr/local \
  /usr/lib /opt)
cuda_driver=$(folder_of 'libcuda.so.1' /usr/local/nvidia /usr/lib/x86_64-linux-gnu /usr/lib64 \
  /usr/lib)
export TPUSIM_LIBRARY_PATH=${cublas}${cublas:+${cuda_driver:+:}}${cuda_driver}
