#!/usr/bin/env bash
# Finds the libclang shared library the way bindgen (clang-sys) does, and
# prints its path; exits 1 when there is none.
#
#   scripts/find-libclang.sh            search LIBCLANG_PATH, `llvm-config --libdir`,
#                                       LD_LIBRARY_PATH and the system folders
#   scripts/find-libclang.sh DIR...     search only these folders (the test uses
#                                       fake folders this way)
#
# A file counts when its name is libclang.so, libclang-*.so, libclang.so.* or
# libclang-*.so.*. libclang-cpp.so* (the C++ API, present on a fresh Debian
# with LLVM) is not libclang and never counts: bindgen cannot load it.
set -uo pipefail

is_libclang() {
  local name=$1
  case "$name" in
    libclang-cpp*) return 1 ;;
    libclang.so | libclang-*.so | libclang.so.* | libclang-*.so.*) return 0 ;;
    *) return 1 ;;
  esac
}

dirs=()
if [ $# -gt 0 ]; then
  dirs=("$@")
else
  [ -n "${LIBCLANG_PATH:-}" ] && dirs+=("$LIBCLANG_PATH")
  if command -v llvm-config >/dev/null 2>&1; then
    dirs+=("$(llvm-config --libdir 2>/dev/null)")
  fi
  IFS=: read -r -a ld <<<"${LD_LIBRARY_PATH:-}"
  dirs+=("${ld[@]}")
  shopt -s nullglob
  dirs+=(/usr/lib/llvm-*/lib /usr/local/llvm*/lib* /usr/lib* /usr/lib*/* /usr/local/lib*
    /usr/local/lib*/*)
  shopt -u nullglob
fi

for dir in "${dirs[@]}"; do
  [ -n "$dir" ] && [ -d "$dir" ] || continue
  for path in "$dir"/libclang*; do
    [ -e "$path" ] || continue
    if is_libclang "$(basename "$path")"; then
      echo "$path"
      exit 0
    fi
  done
done
exit 1
