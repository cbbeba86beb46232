#!/usr/bin/env python3
"""The docs and --help agree (issue 34): every `gpuwhy COMMAND … --flag` written in the README
and docs/*.md (inline code and fenced blocks) names a command that exists and a flag that the
command's --help lists. Prints one line per mismatch and exits 1 when there is any.

Usage: docs_flags.py GPUWHY ROOT
"""
import glob
import os
import re
import subprocess
import sys

gpuwhy, root = sys.argv[1:3]
files = [os.path.join(root, "README.md")] + sorted(glob.glob(os.path.join(root, "docs", "*.md")))

usages = {}  # (command, flag or None) -> set of "file:line"
for path in files:
    fenced = False
    for n, line in enumerate(open(path, encoding="utf-8"), 1):
        if line.startswith("```"):
            fenced = not fenced
            continue
        texts = [line] if fenced else re.findall(r"`([^`]*)`", line)
        for text in texts:
            if fenced and not re.match(r"\s*(\$ |# )?(sudo )?(\S+=\S+ )*gpuwhy ", text):
                continue  # output, not a command
            for m in re.finditer(r"(?:^|[\s(])gpuwhy ([a-z][a-z-]*)([^;&|#`]*)", text):
                where = "%s:%d" % (os.path.relpath(path, root), n)
                command, rest = m.group(1), m.group(2)
                usages.setdefault((command, None), set()).add(where)
                for flag in re.findall(r"(?<![\w-])--([a-z][a-z0-9-]*)", rest):
                    usages.setdefault((command, flag), set()).add(where)

helps = {}
def help_of(command):
    if command not in helps:
        r = subprocess.run([gpuwhy, command, "--help"], capture_output=True, text=True)
        helps[command] = (r.returncode, r.stdout + r.stderr)
    return helps[command]

problems = 0
checked = 0
for (command, flag), where in sorted(usages.items(), key=lambda kv: (kv[0][0], kv[0][1] or "")):
    rc, text = help_of(command)
    if flag is None:
        # A word after gpuwhy with no flags may be a name ("gpuwhy findings", a Perfetto
        # track); with flags it is meant as a command.
        if rc != 0 and not any(c == command and f for c, f in usages):
            continue
        checked += 1
        if rc != 0:
            problems += 1
            print("FAIL - `gpuwhy %s` is not a command (%s)" % (command, ", ".join(sorted(where))))
        continue
    if rc != 0 or flag in ("help", "version"):
        continue
    checked += 1
    if not re.search(r"(?<![\w-])--%s(?![\w-])" % re.escape(flag), text):
        problems += 1
        print("FAIL - `gpuwhy %s --%s` is in %s but not in `gpuwhy %s --help`"
              % (command, flag, ", ".join(sorted(where)), command))
print("%s - the docs' %d command and flag uses agree with --help"
      % ("ok" if problems == 0 else "FAIL", checked))
sys.exit(1 if problems else 0)
