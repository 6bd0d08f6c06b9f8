#!/usr/bin/env bash
# Installs what building and testing tile needs, idempotently: safe to run again and again.
#   - a Rust toolchain, 1.95 or newer (checked, not installed);
#   - LLVM 22 from Debian, with what its static libraries link against (inkwell, NVPTX back end);
#   - ptxas from PyPI (nvidia-cuda-nvcc 13.0.88) into .tools/, for the offline PTX checks.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v cargo >/dev/null 2>&1; then
  echo "setup: cargo is missing; install Rust 1.95 or newer (https://rustup.rs)" >&2
  exit 1
fi
need="1.95"
have=$(rustc --version | awk '{print $2}')
if [ "$(printf '%s\n%s\n' "$need" "$have" | sort -V | head -n1)" != "$need" ]; then
  echo "setup: rustc $have is older than $need" >&2
  exit 1
fi
echo "setup: rustc $have ok"

llvm_pkgs="llvm-22-dev libpolly-22-dev libzstd-dev zlib1g-dev libxml2-dev libffi-dev"
if [ ! -x /usr/lib/llvm-22/bin/llvm-config ] || ! dpkg -s $llvm_pkgs >/dev/null 2>&1; then
  echo "setup: installing LLVM 22 ($llvm_pkgs)"
  sudo_cmd=""
  [ "$(id -u)" -eq 0 ] || sudo_cmd="sudo"
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq $llvm_pkgs >/dev/null
fi
echo "setup: $(/usr/lib/llvm-22/bin/llvm-config --version | sed 's/^/LLVM /') ok"

ptxas=.tools/nvcc/nvidia/cu13/bin/ptxas
if [ ! -x "$ptxas" ]; then
  echo "setup: installing ptxas (PyPI nvidia-cuda-nvcc==13.0.88) into .tools/nvcc"
  python3 -m pip install -q --disable-pip-version-check --no-deps --target .tools/nvcc nvidia-cuda-nvcc==13.0.88
fi
echo "setup: $("$ptxas" --version | tail -n1) ok"
