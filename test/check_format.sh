#!/usr/bin/env bash
# CTest format_check: every C++ file of the repository is laid out as .clang-format says, with
# Debian 12's clang-format 14 (another version formats some constructs differently, so it is
# not used). To fix: clang-format-14 -i FILE...  Exit 77 (skipped) without clang-format 14.
#   usage: check_format.sh SOURCE_DIR
set -uo pipefail
cd "$1" || exit 2
tool=""
for t in clang-format-14 clang-format; do
  if command -v "$t" >/dev/null && "$t" --version | grep -q "version 14\."; then
    tool=$t
    break
  fi
done
if [ -z "$tool" ]; then
  echo "format_check skipped: clang-format 14 is not installed (apt-get install clang-format)" >&2
  exit 77
fi
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  mapfile -t files < <(git ls-files -co --exclude-standard -- '*.cc' '*.h')
else
  mapfile -t files < <(find . -path ./build\* -prune -o \( -name '*.cc' -o -name '*.h' \) -print)
fi
# One run over every file; each misplaced line is reported as FILE:LINE:COL: error: ...
mapfile -t bad < <("$tool" --dry-run -Werror "${files[@]}" 2>&1 |
                   sed -n 's/^\([^:]*\):[0-9]*:[0-9]*: error: .*/\1/p' | sort -u)
echo "format_check: ${#files[@]} files, ${#bad[@]} not formatted"
if [ ${#bad[@]} -gt 0 ]; then
  printf '  %s\n' "${bad[@]}"
  echo "fix with: $tool -i ${bad[*]}"
  exit 1
fi
