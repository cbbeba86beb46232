#!/usr/bin/env python3
"""Generates gpuwhy's man pages and shell completions from the binary's own --help texts.

    gen_docs.py --gpuwhy build/gpuwhy --out build/packaging

writes OUT/man/gpuwhy.1 and OUT/man/gpuwhy-<command>.1 for every command `gpuwhy --help` lists,
and OUT/completion/gpuwhy.bash (bash) and OUT/completion/_gpuwhy (zsh). Nothing is written by
hand per command: the command list, each command's usage, description and flags come from the
binary, so the pages and completions cannot drift from it. The page date is SOURCE_DATE_EPOCH
when set (reproducible builds), else today.
"""

import argparse
import datetime
import os
import re
import subprocess
import sys

# Flag values that name files: their completion offers paths.
PATH_VALUES = {"PATH", "FILE", "DB", "DIR"}


class Flag:
    def __init__(self, name, value, help_text):
        self.name = name          # "--db"
        self.value = value        # "PATH", or "" for a boolean flag
        self.help = help_text

    @property
    def takes_path(self):
        return self.value in PATH_VALUES or self.value.endswith(".db")


class Command:
    def __init__(self, name, summary):
        self.name = name
        self.summary = summary
        self.usage = ""
        self.description = []     # lines between the usage and "Flags:"
        self.flags = []


def run_help(binary, *args):
    out = subprocess.run([binary, *args], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                         check=False, env={**os.environ, "LC_ALL": "C.UTF-8"})
    if out.returncode != 0:
        sys.exit(f"gen_docs: `{binary} {' '.join(args)}` exited {out.returncode}:\n"
                 f"{out.stdout.decode(errors='replace')}")
    return out.stdout.decode("utf-8").splitlines()


def parse_main(lines):
    """`gpuwhy --help`: the tagline, the command list, the closing lines."""
    m = re.match(r"^gpuwhy (\S+) \S+ (.*)$", lines[0])
    if not m:
        sys.exit(f"gen_docs: unexpected first line of gpuwhy --help: {lines[0]!r}")
    version, tagline = m.group(1), m.group(2)
    commands, trailer, state = [], [], "head"
    for line in lines[1:]:
        if state == "head" and line == "Commands:":
            state = "commands"
        elif state == "commands":
            cm = re.match(r"^  (\S+)\s+(.*)$", line)
            if cm:
                commands.append(Command(cm.group(1), cm.group(2)))
            elif line.strip() == "":
                state = "trailer"
        elif state == "trailer" and line.strip():
            trailer.append(line)
    if not commands:
        sys.exit("gen_docs: gpuwhy --help lists no commands")
    return version, tagline, commands, trailer


def parse_command(cmd, lines):
    """`gpuwhy CMD --help`: "Usage: …", a blank line, the description, "Flags:", one per line."""
    if not lines or not lines[0].startswith("Usage: "):
        sys.exit(f"gen_docs: `gpuwhy {cmd.name} --help` does not start with Usage:")
    cmd.usage = lines[0][len("Usage: "):]
    body = lines[1:]
    in_flags = False
    for line in body:
        if line == "Flags:":
            in_flags = True
            continue
        if line.startswith("  -h, --help"):
            in_flags = True
            continue
        if in_flags:
            fm = re.match(r"^  (--[A-Za-z0-9][A-Za-z0-9-]*|-[A-Za-z0-9])(?: (\S+))?\s{2,}(.*)$", line)
            if not fm:
                sys.exit(f"gen_docs: cannot read a flag line of gpuwhy {cmd.name}: {line!r}")
            cmd.flags.append(Flag(fm.group(1), fm.group(2) or "", fm.group(3)))
        else:
            cmd.description.append(line)
    while cmd.description and not cmd.description[0].strip():
        cmd.description.pop(0)
    while cmd.description and not cmd.description[-1].strip():
        cmd.description.pop()


# --- roff --------------------------------------------------------------------------------------

# Characters the help texts use, as groff glyph names that every output device (ascii included)
# can show; anything else non-ASCII becomes \[uXXXX].
GLYPHS = {"—": r"\(em", "–": r"\(en", "→": r"\(->", "←": r"\(<-", "×": r"\(mu", "µ": r"\(mc",
          "…": "...", "≥": r"\(>=", "≤": r"\(<=", "·": r"\(pc", "↳": r"\(->", "“": r"\(lq",
          "”": r"\(rq", "‘": r"\(oq", "’": r"\(cq", "✓": "ok", "✗": "x"}


def roff(text):
    """Escapes text for a roff line: backslashes, minus signs, code spans, non-ASCII glyphs."""
    out = []
    for ch in text:
        if ch == "\\":
            out.append(r"\e")
        elif ch == "-":
            out.append(r"\-")
        elif ord(ch) > 127:
            out.append(GLYPHS.get(ch, "\\[u%04X]" % ord(ch)))
        else:
            out.append(ch)
    s = "".join(out)
    s = re.sub(r"`([^`]+)`", r"\\fB\1\\fR", s)  # `gpuwhy trace` in bold
    return s


def roff_line(text):
    """One input line: a leading '.' or "'" would be read as a request."""
    s = roff(text)
    return "\\&" + s if s[:1] in (".", "'") else s


def roff_blocks(lines):
    """Help text paragraphs: flowing lines are filled; indented lines (lists) keep their layout."""
    out, para, pre = [], [], []

    def flush():
        if para:
            out.extend([".PP", roff_line(" ".join(p.strip() for p in para))])
            para.clear()
        if pre:
            out.extend([".PP", ".RS 2", ".nf"] + [roff_line(p) for p in pre] + [".fi", ".RE"])
            pre.clear()

    for line in lines:
        if not line.strip():
            flush()
        elif line.startswith(" "):
            if para:
                flush()
            pre.append(line[2:] if line.startswith("  ") else line.lstrip())
        else:
            if pre:
                flush()
            para.append(line)
    flush()
    return out


def man_header(title, date, version):
    # No hyphenation: flag names and paths must stay whole.
    return [f'.TH {title} 1 "{date}" "gpuwhy {version}" "User Commands"', ".nh"]


def main_page(version, tagline, commands, trailer, date):
    out = [".\\\" Generated by packaging/gen_docs.py from `gpuwhy --help`; do not edit."]
    out += man_header("GPUWHY", date, version)
    out += [".SH NAME", "gpuwhy \\- " + roff(tagline), ".SH SYNOPSIS",
            ".B gpuwhy", ".I command", "[\\fIflags\\fR]", ".br", ".B gpuwhy help",
            "[\\fIcommand\\fR]", ".SH DESCRIPTION"]
    out += roff_blocks(trailer)
    out += [".SH COMMANDS"]
    for c in commands:
        out += [".TP"]
        out += [f".BR gpuwhy\\-{roff(c.name)} (1)"] if c.flags is not None and c.usage else \
               [f".B {roff(c.name)}"]
        out += [roff_line(c.summary)]
    out += [".SH ENVIRONMENT", ".TP", ".B GPUWHY_DB",
            "the database file when \\fB\\-\\-db\\fR is not given",
            ".SH FILES", ".TP", ".I ~/.gpuwhy/gpuwhy.db",
            "the default database of the invoking user (also under sudo)",
            ".TP", ".I /etc/default/gpuwhy",
            "settings of \\fBgpuwhy\\-recorder.service\\fR, the always-on flight recorder "
            "(database path, size cap, extra \\fBtrace\\fR flags)",
            ".SH EXIT STATUS",
            "0 on success, 1 when the command failed, 2 on a usage error.",
            ".SH SEE ALSO"]
    pages = [c for c in commands if c.usage]
    out += [",\n".join(f".BR gpuwhy\\-{roff(c.name)} (1)" for c in pages)]
    return "\n".join(out) + "\n"


def command_page(cmd, version, date):
    out = [f".\\\" Generated by packaging/gen_docs.py from `gpuwhy {cmd.name} --help`; do not edit."]
    out += man_header("GPUWHY\\-" + roff(cmd.name.upper()), date, version)
    out += [".SH NAME", f"gpuwhy\\-{roff(cmd.name)} \\- {roff(cmd.summary)}", ".SH SYNOPSIS"]
    usage = cmd.usage
    prefix = "gpuwhy " + cmd.name
    rest = usage[len(prefix):].strip() if usage.startswith(prefix) else usage
    out += [f".B gpuwhy {roff(cmd.name)}"] + ([roff_line(rest)] if rest else [])
    out += [".SH DESCRIPTION"] + roff_blocks(cmd.description)
    out += [".SH OPTIONS"]
    for f in cmd.flags:
        if f.value:
            out += [".TP", f'.BI "{roff(f.name)} " {roff(f.value)}']
        else:
            out += [".TP", f".B {roff(f.name)}"]
        out += [roff_line(f.help)]
    out += [".TP", '.B "\\-h, \\-\\-help"', "show this help"]
    out += [".SH EXIT STATUS", "0 on success, 1 when the command failed, 2 on a usage error.",
            ".SH SEE ALSO", ".BR gpuwhy (1)"]
    return "\n".join(out) + "\n"


# --- completions -------------------------------------------------------------------------------

def bash_completion(commands):
    names = " ".join(c.name for c in commands)
    cases = []
    for c in commands:
        if not c.usage:
            continue
        flags = " ".join([f.name for f in c.flags] + ["--help"])
        valued = " ".join(f.name for f in c.flags if f.value)
        paths = " ".join(f.name for f in c.flags if f.takes_path)
        cases.append(f'    {c.name}) flags="{flags}"; valued="{valued}"; paths="{paths}" ;;')
    return f"""# bash completion for gpuwhy. Generated by packaging/gen_docs.py from the --help texts of
# the gpuwhy binary; do not edit. Needs no bash-completion helpers.
_gpuwhy() {{
  local cur=${{COMP_WORDS[COMP_CWORD]}} prev=""
  [ "$COMP_CWORD" -gt 0 ] && prev=${{COMP_WORDS[COMP_CWORD-1]}}
  local commands="{names}"
  COMPREPLY=()
  if [ "$COMP_CWORD" -le 1 ]; then
    COMPREPLY=($(compgen -W "$commands --help --version" -- "$cur"))
    return 0
  fi
  local cmd=${{COMP_WORDS[1]}} flags="" valued="" paths=""
  case "$cmd" in
    help)
      [ "$COMP_CWORD" -eq 2 ] && COMPREPLY=($(compgen -W "$commands" -- "$cur"))
      return 0 ;;
{chr(10).join(cases)}
    *) return 0 ;;
  esac
  # --flag=value: bash splits at '=' (COMP_WORDBREAKS), so the flag is two words back.
  if [ "$cur" = "=" ]; then
    prev=${{COMP_WORDS[COMP_CWORD-1]}}; cur=""
  elif [ "$prev" = "=" ] && [ "$COMP_CWORD" -ge 3 ]; then
    prev=${{COMP_WORDS[COMP_CWORD-2]}}
  fi
  if [[ " $valued " == *" $prev "* ]]; then
    if [[ " $paths " == *" $prev "* ]]; then
      compopt -o filenames 2>/dev/null
      COMPREPLY=($(compgen -f -- "$cur"))
    fi
    return 0
  fi
  if [[ "$cur" == -* ]]; then
    COMPREPLY=($(compgen -W "$flags" -- "$cur"))
    return 0
  fi
  compopt -o filenames 2>/dev/null
  COMPREPLY=($(compgen -f -- "$cur"))
  return 0
}}
complete -F _gpuwhy gpuwhy
"""


def sq(text):
    """Inside single quotes."""
    return text.replace("'", "'\\''")


def zsh_quote(text):
    """A help text inside an _arguments spec's [...]: brackets, colons, backslashes escaped."""
    text = text.replace("\\", "\\\\").replace("[", "\\[").replace("]", "\\]").replace(":", "\\:")
    return sq(text)


def zsh_message(text):
    """An _arguments message field (between colons)."""
    return sq(text.replace("\\", "\\\\").replace(":", "\\:"))


def zsh_completion(commands):
    described = "\n".join(f"    '{c.name}:{sq(c.summary)}'" for c in commands)
    cases = []
    for c in commands:
        if not c.usage:
            continue
        specs = []
        for f in c.flags:
            rep = "*" if "repeatable" in f.help else ""
            if f.value:
                action = "_files" if f.takes_path else " "
                specs.append(f"'{rep}{f.name}=[{zsh_quote(f.help)}]:{zsh_message(f.value)}:{action}'")
            else:
                specs.append(f"'{f.name}[{zsh_quote(f.help)}]'")
        specs.append("'(- *)'{-h,--help}'[show this help]'")
        specs.append("'*:file:_files'")
        cases.append(f"    {c.name})\n      _arguments -s \\\n        " +
                     " \\\n        ".join(specs) + " ;;")
    return f"""#compdef gpuwhy
# zsh completion for gpuwhy. Generated by packaging/gen_docs.py from the --help texts of the
# gpuwhy binary; do not edit.
_gpuwhy() {{
  local -a commands
  commands=(
{described}
  )
  if (( CURRENT == 2 )); then
    _describe -t commands 'gpuwhy command' commands
    return
  fi
  local cmd=$words[2]
  shift words
  (( CURRENT-- ))
  case $cmd in
    help) _describe -t commands 'gpuwhy command' commands ;;
{chr(10).join(cases)}
  esac
}}
_gpuwhy "$@"
"""


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gpuwhy", required=True, help="the built gpuwhy binary")
    ap.add_argument("--out", required=True, help="output directory")
    args = ap.parse_args()

    version, tagline, commands, trailer = parse_main(run_help(args.gpuwhy, "--help"))
    for c in commands:
        if c.name == "help":  # `gpuwhy help CMD` is the same as `gpuwhy CMD --help`
            c.flags = None
            continue
        parse_command(c, run_help(args.gpuwhy, c.name, "--help"))
    epoch = os.environ.get("SOURCE_DATE_EPOCH")
    when = (datetime.datetime.fromtimestamp(int(epoch), datetime.timezone.utc) if epoch
            else datetime.datetime.now(datetime.timezone.utc))
    date = when.strftime("%Y-%m-%d")

    man_dir = os.path.join(args.out, "man")
    comp_dir = os.path.join(args.out, "completion")
    os.makedirs(man_dir, exist_ok=True)
    os.makedirs(comp_dir, exist_ok=True)
    pages = {"gpuwhy.1": main_page(version, tagline, commands, trailer, date)}
    for c in commands:
        if c.usage:
            pages[f"gpuwhy-{c.name}.1"] = command_page(c, version, date)
    for stale in os.listdir(man_dir):  # a command that no longer exists leaves no page behind
        if stale.endswith(".1") and stale not in pages:
            os.remove(os.path.join(man_dir, stale))
    for name, text in pages.items():
        with open(os.path.join(man_dir, name), "w", encoding="ascii") as f:
            f.write(text)
    with open(os.path.join(comp_dir, "gpuwhy.bash"), "w", encoding="utf-8") as f:
        f.write(bash_completion(commands))
    with open(os.path.join(comp_dir, "_gpuwhy"), "w", encoding="utf-8") as f:
        f.write(zsh_completion(commands))
    print(f"gen_docs: {len(pages)} man pages and 2 completions for gpuwhy {version} in {args.out}")


if __name__ == "__main__":
    main()
