#!/usr/bin/env bash
# Regenerate the shell completions from the Typer app: completions/spurctl.bash,
# completions/_spurctl (zsh) and completions/spurctl.fish. The output is committed;
# tests/e2e/test_completions.py fails when it is stale.
# Usage: scripts/gen_completions.sh [OUTDIR]   (default: completions)
# It runs the `spurctl` console script (or $SPURCTL): a completion script names the
# program it completes after argv[0], and `python -m spurctl` would name it wrongly.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
out=${1:-$here/completions}
spurctl=${SPURCTL:-spurctl}
if ! command -v "$spurctl" >/dev/null; then
  echo "gen_completions.sh: no '$spurctl' command: install spurctl (pip install -e .) or set SPURCTL" >&2
  exit 2
fi
if [ "$(basename "$spurctl")" != spurctl ]; then
  echo "gen_completions.sh: SPURCTL must be a command named spurctl, not '$spurctl'" >&2
  exit 2
fi
mkdir -p "$out"
for shell_file in bash:spurctl.bash zsh:_spurctl fish:spurctl.fish; do
  shell=${shell_file%%:*}
  file=${shell_file#*:}
  # Typer spells the instruction source_<shell>. Its script opens with a blank line,
  # which would hide zsh's "#compdef" tag (it must be the first line): drop it.
  _SPURCTL_COMPLETE="source_$shell" "$spurctl" | sed '1{/^$/d}' >"$out/$file"
done
