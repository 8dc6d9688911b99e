#!/usr/bin/env python3
"""Writes fay's man pages and shell completions from the help text the CLI itself prints, so
that they never disagree with it: fay(1), fay-SUB(1) for each subcommand (fay-cluster-status(1)
for nested ones), a bash completion script and a zsh one.

  cli_docs.py --fay build/fay --version 0.2.0 --out build/cli_docs
"""

import argparse
import os
import re
import subprocess
import sys

ENTRY = re.compile(r"^  (\S.*?)(?:\s{2,}(\S.*))?$")


def help_of(fay, path):
    out = subprocess.run([fay, *path, "--help"], capture_output=True, text=True, check=True)
    return out.stdout


def parse(text, path):
    """{summary, usage, sections: {name: [(term, description)]}} of one --help."""
    lines = text.rstrip("\n").split("\n")
    page = {"summary": lines[0].strip(), "usage": "", "sections": {}}
    section = None
    for ln in lines[1:]:
        if ln.startswith("Usage: "):
            # The binary's path as invoked, then the subcommand path: printed as `fay SUB`.
            rest = ln[len("Usage: "):].split(" ", 1)
            words = rest[1] if len(rest) > 1 else ""
            for p in path:
                words = words[len(p) + 1:] if words.startswith(p + " ") else words
            page["usage"] = " ".join(["fay", *path, words]).strip()
            continue
        if ln and not ln.startswith(" ") and ln.endswith(":"):
            section = ln[:-1]
            page["sections"][section] = []
            continue
        if section is None or not ln.strip():
            continue
        entries = page["sections"][section]
        if ln.startswith("  ") and not ln.startswith("   "):
            m = ENTRY.match(ln)
            entries.append([m.group(1).strip(), (m.group(2) or "").strip()])
        elif entries:  # a description continued, or put on its own line under a long term
            entries[-1][1] = (entries[-1][1] + " " + ln.strip()).strip()
    return page


def collect(fay, path=()):
    page = parse(help_of(fay, list(path)), list(path))
    pages = {path: page}
    for term, _ in page["sections"].get("Subcommands", []):
        pages.update(collect(fay, (*path, term.split()[0])))
    return pages


def roff(text):
    text = text.replace("\\", "\\\\").replace("-", "\\-")
    return "\n".join(("\\&" + ln if ln[:1] in (".", "'") else ln) for ln in text.split("\n"))


def man_page(path, page, pages, version):
    name = "-".join(["fay", *path])
    out = [f'.TH {name.upper()} 1 "" "fay {version}" "fay manual"',
           ".SH NAME", f"{roff(name)} \\- {roff(page['summary'])}",
           ".SH SYNOPSIS", f".B {roff(page['usage'])}"]
    titles = {"Positionals": "ARGUMENTS", "Options": "OPTIONS", "Subcommands": "COMMANDS"}
    for section, entries in page["sections"].items():
        out.append(f".SH {titles.get(section, section.upper())}")
        for term, desc in entries:
            out += [".TP", f".B {roff(term)}", roff(desc)]
    see = ["fay(1)"] if path else []
    see += [f"{'-'.join(['fay', *p])}(1)" for p in pages if len(p) == len(path) + 1
            and p[:len(path)] == path]
    out += [".SH SEE ALSO", roff(", ".join(see + ["the docs/ folder of fay's sources"]))]
    return "\n".join(out) + "\n"


def options_of(page):
    """Each option's spellings and whether it takes a value."""
    opts = []
    for term, desc in page["sections"].get("Options", []):
        spell, _, kind = term.partition(" ")
        opts.append((spell.split(","), bool(kind.strip()), desc))
    return opts


def bash_completion(pages):
    cases = []
    for path, page in sorted(pages.items()):
        words = [n for names, _, _ in options_of(page) for n in names]
        words += [t.split()[0] for t, _ in page["sections"].get("Subcommands", [])]
        valued = [n for names, v, _ in options_of(page) if v for n in names]
        subs = 1 if page["sections"].get("Subcommands") else 0
        cases.append(f'    "{" ".join(path)}") words="{" ".join(words)}"; '
                     f'valued="{" ".join(valued)}"; subs={subs} ;;')
    return f"""# bash completion for fay, generated from its --help (scripts/cli_docs.py)
_fay() {{
  local cur=${{COMP_WORDS[COMP_CWORD]}} prev=${{COMP_WORDS[COMP_CWORD-1]}}
  local path="" w words="" valued="" subs=0 i
  # The subcommand path so far: the words that are subcommands of what precedes them.
  for ((i = 1; i < COMP_CWORD; i++)); do
    w=${{COMP_WORDS[i]}}
    [[ $w == -- ]] && {{ COMPREPLY=($(compgen -f -- "$cur")); return; }}
    case "$path" in
{chr(10).join(c.replace("    ", "      ", 1) for c in cases)}
    esac
    [[ " $words " == *" $w "* && $w != -* ]] && path="${{path:+$path }}$w"
  done
  case "$path" in
{chr(10).join(cases)}
  esac
  if [[ " $valued " == *" $prev "* ]]; then
    COMPREPLY=($(compgen -f -- "$cur"))
  elif [[ $cur == -* || $subs == 1 ]]; then
    COMPREPLY=($(compgen -W "$words" -- "$cur"))
  else
    COMPREPLY=($(compgen -W "$words" -- "$cur") $(compgen -f -- "$cur"))
  fi
}}
complete -o filenames -F _fay fay
"""


def zsh_quote(s):
    return s.replace("\\", "\\\\").replace("'", "'\\''").replace("[", "(").replace("]", ")") \
        .replace(":", " -")


def zsh_completion(pages):
    funcs = []
    for path, page in sorted(pages.items(), key=lambda kv: len(kv[0]), reverse=True):
        fn = "_fay" + "".join("_" + p for p in path)
        specs = []
        for names, valued, desc in options_of(page):
            d = zsh_quote(desc)
            for n in names:
                specs.append(f"'{n}[{d}]" + (":value:_files'" if valued else "'"))
        subs = page["sections"].get("Subcommands", [])
        if subs:
            items = " ".join(f"'{t.split()[0]}:{zsh_quote(d)}'" for t, d in subs)
            body = f"""  local -a subcmds=({items})
  _arguments -C {' '.join(specs)} '1: :->sub' '*:: :->rest'
  case $state in
    sub) _describe command subcmds ;;
    rest)
      case $words[1] in
{chr(10).join(f"        {t.split()[0]}) {fn}_{t.split()[0]} ;;" for t, _ in subs)}
      esac ;;
  esac"""
        else:
            body = f"  _arguments {' '.join(specs)} '*:file:_files'"
        funcs.append(f"{fn}() {{\n{body}\n}}")
    return "#compdef fay\n# zsh completion for fay, generated from its --help (scripts/cli_docs.py)\n" \
        + "\n\n".join(funcs) + '\n\n_fay "$@"\n'


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--fay", required=True)
    ap.add_argument("--version", required=True)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    pages = collect(a.fay)
    os.makedirs(os.path.join(a.out, "man1"), exist_ok=True)
    for path, page in pages.items():
        name = "-".join(["fay", *path])
        with open(os.path.join(a.out, "man1", name + ".1"), "w") as f:
            f.write(man_page(path, page, pages, a.version))
    with open(os.path.join(a.out, "fay.bash"), "w") as f:
        f.write(bash_completion(pages))
    with open(os.path.join(a.out, "_fay"), "w") as f:
        f.write(zsh_completion(pages))
    print(f"cli_docs: {len(pages)} man pages, bash and zsh completion in {a.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
