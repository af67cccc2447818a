"""Runs every ```python block of a document whose first line is "# example", in order, as one
script (later blocks use what earlier ones made), in a scratch directory. Fails on the first
error, naming the block.

Usage: run_doc_examples.py DOC.md WORKDIR
"""
import os
import re
import shutil
import sys
import traceback


def example_blocks(text):
    for match in re.finditer(r"^```python\n(.*?)^```", text, flags=re.S | re.M):
        body = match.group(1)
        if body.startswith("# example\n"):
            yield text.count("\n", 0, match.start()) + 2, body


def main():
    doc, work = os.path.abspath(sys.argv[1]), sys.argv[2]
    with open(doc, encoding="utf-8") as f:
        blocks = list(example_blocks(f.read()))
    if not blocks:
        sys.exit(f"no '# example' python blocks in {doc}")
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    os.chdir(work)
    scope = {"__name__": "__doc_example__"}
    for line, body in blocks:
        try:
            exec(compile(body, f"{doc}:{line}", "exec"), scope)
        except Exception:
            traceback.print_exc()
            sys.exit(f"{doc}: the example at line {line} failed")
    print(f"{len(blocks)} examples of {os.path.basename(doc)} ran")


if __name__ == "__main__":
    main()
