#!/usr/bin/env bash
# Regenerates README.md's parameter table from the registry (what test readme_params_table
# checks). Usage: scripts/update-readme-params.sh [BUILD_DIR]
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
TOOL=${1:-$ROOT/build}/bin/autopilot
"$TOOL" params --markdown > "$ROOT/.params.md.tmp"
python3 - "$ROOT/README.md" "$ROOT/.params.md.tmp" <<'PY'
import sys
readme, table = open(sys.argv[1]).read(), open(sys.argv[2]).read()
begin, end = "<!-- params:begin -->\n", "<!-- params:end -->"
i, j = readme.index(begin) + len(begin), readme.index(end)
open(sys.argv[1], "w").write(readme[:i] + table + readme[j:])
PY
rm -f "$ROOT/.params.md.tmp"
