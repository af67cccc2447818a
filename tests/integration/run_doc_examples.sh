#!/usr/bin/env bash
# Runs every ```sh block of a document whose first line is "# example", in order, in a scratch
# directory, with $qd set to the qnn-debug under test. Fails on the first failing command.
#   run_doc_examples.sh QNN_DEBUG DOC.md WORKDIR
set -euo pipefail
qd=$(realpath "$1")
doc=$(realpath "$2")
work=$3
rm -rf "$work" && mkdir -p "$work" && cd "$work"
script=$(awk '
  /^```sh$/ { inside = 1; first = 1; next }
  /^```/    { if (inside && keep) print ""; inside = 0; keep = 0; next }
  inside && first { keep = ($0 == "# example"); first = 0; next }
  inside && keep { print }
' "$doc")
if [[ -z "$script" ]]; then
  echo "no '# example' blocks in $doc" >&2
  exit 1
fi
export qd
bash -euo pipefail -c "$script"
