#!/usr/bin/env bash
# Regenerates src/vec/kernels.ptx from src/vec/kernels.cu (only needed after editing
# the kernels; the PTX is committed, so building vlad needs no CUDA and no clang).
#
# Needs clang (14 or later, with the NVPTX target: Debian's `clang-14`) and NVIDIA's
# libdevice.10.bc, e.g. from the PyPI wheel `nvidia-cuda-nvcc-cu12`:
#   pip download --no-deps nvidia-cuda-nvcc-cu12 -d /tmp/w && unzip -o /tmp/w/*.whl -d /tmp/w/x
#   LIBDEVICE=/tmp/w/x/nvidia/cuda_nvcc/nvvm/libdevice/libdevice.10.bc tools/gen-ptx.sh
# If PTXAS is set (the same wheel's bin/ptxas), the result is also assembled for
# sm_70, sm_80 and sm_90 as a check.
set -euo pipefail
cd "$(dirname "$0")/.."
CLANG=${CLANG:-$(command -v clang-14 || command -v clang)}
: "${LIBDEVICE:?set LIBDEVICE to libdevice.10.bc}"
# PTX ISA 6.3 for sm_70: the oldest GPUs we target; the driver JIT-compiles it for newer ones.
"$CLANG" -x cuda --cuda-device-only --cuda-gpu-arch=sm_70 -nocudainc -nocudalib -O3 -S \
  -Xclang -target-feature -Xclang +ptx63 \
  -Xclang -mlink-builtin-bitcode -Xclang "$LIBDEVICE" \
  src/vec/kernels.cu -o src/vec/kernels.ptx
if [ -n "${PTXAS:-}" ]; then
  for arch in sm_70 sm_80 sm_90; do
    "$PTXAS" -arch=$arch src/vec/kernels.ptx -o /dev/null
  done
  echo "ptxas: ok for sm_70 sm_80 sm_90"
fi
echo "wrote src/vec/kernels.ptx"
