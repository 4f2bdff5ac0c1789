#!/usr/bin/env bash
# Packs built binaries with the shared libraries they need into one folder that runs on a lent
# GPU machine, which has the NVIDIA driver and the CUDA toolkit but none of our Debian packages.
#
#   tools/device/bundle.sh [OUT] [BINARY ...]  (default: out/device; tpusim, the runtime tests and
#                                              the GPU GEMM benchmark)
#   OUT/run tpusim opcheck --backends gpu,gpu:mxu  (on the device machine)
#
# Every library ldd resolves is copied, glibc and the dynamic loader included, and OUT/run starts
# the binary through the bundled loader, so the device's own glibc version does not matter. The
# Fashion-MNIST idx files (Debian's dataset-fashion-mnist, 30 MB) go in OUT/fashion-mnist and
# OUT/run points TPUSIM_FASHION_MNIST_IDX there, so tpusim train and compare convert them on the
# device as they do here. The
# CUDA libraries are not copied (cuBLAS alone is over 500 MB): the driver (libcuda) and cuBLAS
# come from the device, found through the loader's cache and the CUDA toolkit's lib64 (cuBLAS is
# opened when a gpu backend is made: runtime/backend/gpu/cublas_library.h).
set -euo pipefail
cd "$(dirname "$0")/../.."
out=${1:-out/device}
shift || true
binaries=("$@")
[ ${#binaries[@]} -gt 0 ] ||
  binaries=(build/bin/tpusim build/bin/tpusim_runtime_tests build/bin/tpusim_gpu_bench)
rm -rf "$out"
mkdir -p "$out/bin" "$out/lib"
for b in "${binaries[@]}"; do
  [ -x "$b" ] || { echo "bundle.sh: $b is not a built executable (make build first)" >&2; exit 1; }
  cp "$b" "$out/bin/"
  # "libfoo.so.1 => /path/libfoo.so.1 (0x...)" and the loader's own "/lib64/ld-linux... (0x...)".
  ldd "$b" | awk '$2 == "=>" && $3 ~ /^\// {print $3} $1 ~ /^\// {print $1}' | while read -r lib; do
    case "$lib" in
      */cuda/*|*libcuda.so*|*libcublas*|*libnvidia*) continue ;;
    esac
    cp -Ln "$lib" "$out/lib/"
  done
done
# glibc's other libraries, from beside the bundled libc: the driver (libcuda) and cuBLAS, which come
# from the device, load libdl, libpthread and librt, and the device's own copies belong to
# another glibc than the bundled libc and loader.
libc_dir=$(dirname "$(ldd "${binaries[0]}" | awk '$1 == "libc.so.6" {print $3}')")
for lib in libdl.so.2 libpthread.so.0 librt.so.1 libresolv.so.2 libutil.so.1; do
  [ -e "$libc_dir/$lib" ] && cp -Ln "$libc_dir/$lib" "$out/lib/"
done
idx=/usr/share/datasets/fashion-mnist
[ -f "$idx/train-images-idx3-ubyte.gz" ] ||
  { echo "bundle.sh: no Fashion-MNIST in $idx (make deps installs dataset-fashion-mnist)" >&2; exit 1; }
mkdir -p "$out/fashion-mnist"
cp "$idx"/*-idx[13]-ubyte.gz "$out/fashion-mnist/"
loader=$(cd "$out/lib" && ls ld-linux-*.so.* | head -1)
cat > "$out/run" <<RUN
#!/usr/bin/env bash
# Runs a bundled binary through the bundled loader: OUT/run NAME [ARGS...]
here=\$(cd "\$(dirname "\$0")" && pwd)
name=\$1; shift
cuda=\${CUDA_HOME:-/usr/local/cuda}
export TPUSIM_FASHION_MNIST_IDX=\${TPUSIM_FASHION_MNIST_IDX:-\$here/fashion-mnist}
# --library-path replaces LD_LIBRARY_PATH, so the device's own is appended, after the CUDA
# toolkit's folders and any TPUSIM_LIBRARY_PATH (where tools/device/device_call.sh found cuBLAS and
# the driver); the loader's cache comes last.
path=\$here/lib:\$cuda/lib64:\$cuda/lib\${TPUSIM_LIBRARY_PATH:+:\$TPUSIM_LIBRARY_PATH}
path=\$path\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}
exec "\$here/lib/$loader" --library-path "\$path" "\$here/bin/\$name" "\$@"
RUN
chmod +x "$out/run"
echo "bundle.sh: $(ls "$out/bin" | wc -l) binaries, $(ls "$out/lib" | wc -l) libraries," \
  "Fashion-MNIST, $(du -sh "$out" | cut -f1) in $out"
