# Regenerates linetables.txt: for a sample function compiled by this interpreter, its
# co_linetable and the line of every instruction offset (from co_lines(), the interpreter's own
# decoder). python_code_test.cc decodes the table and compares. Run with each CPython:
#   for p in /root/.pyenv/versions/3.1[0-3]*/bin/python3.1?; do $p make_linetables.py; done > linetables.txt
import sys

SOURCE = "def sample(xs):\n" + "    total = 0\n" + "\n" * 300 + """    for x in xs:
        if x % 2:
            total += (x *
                      2)
        else:
            total -= x
""" + "\n" * 5 + """    try:
        total = total / len(xs)
    except ZeroDivisionError:
        total = -1
    return [y for y in
            range(total if total > 0 else 3)]
"""
ns = {}
exec(compile(SOURCE, "sample.py", "exec"), ns)
code = ns["sample"].__code__
pairs = []
for start, end, line in code.co_lines():
    for off in range(start, end, 2):
        pairs.append("%d:%d" % (off, -1 if line is None else line))
print("3.%d %d %s %s" % (sys.version_info[1], code.co_firstlineno, code.co_linetable.hex(),
                        ",".join(pairs)))
