"""A launch held in a systemd unit (`ExecStart=`) or a Dockerfile (`CMD`, `ENTRYPOINT`),
the two places an operator's server command lives besides scripts and manifests.

Neither file is shell: a unit's `Description=SGLang (tp 8)` and a Dockerfile's `CMD
["python3", "-m", ...]` refuse the shell parser. Each is turned into shell text at the same
width, what does not launch blanked, so positions stay the user's:

- a unit: `ExecStart=` (and its `-@:+!` prefixes) is blanked before the command, which
  reads as shell; where the text has a `[Service]` section, its headers and other
  `Key=value` lines (`Description=`, `Restart=`) are not read;
- a Dockerfile: `CMD` / `ENTRYPOINT` in exec form lose the keyword, the brackets and the
  commas, leaving their JSON strings as quoted shell words; in shell form only the keyword;
  `ENV`/`ARG` lose the keyword and read as the server's environment (a unit's
  `Environment=` likewise); every other instruction (`RUN`
  runs when the image is built, not when the server starts) is not read. An `ENTRYPOINT`
  right before a `CMD` continues into it, as Docker appends one to the other. Exec-form
  words are JSON, not shell: `--rewrite` does not edit them (`launch.FORM_TEXT`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from meshsat.solver.inputs.shell_masks import blanked

_EXEC_START = re.compile(r"^([ \t]*ExecStart=[-@:+!]*)(?=.*sglang)", re.M)
_SECTION = re.compile(r"^[ \t]*\[(?:Unit|Service|Install)\][ \t]*$", re.M)
#: A unit's `Key=value` line (systemd keys are CamelCase; a shell's assignment is not).
_UNIT_KEY = re.compile(r"^[ \t]*(?:\[[A-Za-z]+\]|[A-Z][a-z]+(?:[A-Z][a-z]*)*=.*)$")
#: A unit's `Environment=` key (its `NAME=value` words, quoted or not, follow).
_ENVIRONMENT = re.compile(r"[ \t]*Environment=")
_FROM = re.compile(r"^[ \t]*FROM[ \t]+\S", re.M | re.I)
_INSTRUCTION = re.compile(r"^[ \t]*([A-Za-z]+)\b", re.M)


@dataclass(frozen=True)
class ServiceText:
    """The text as the shell should read it, what was done (a note; None: nothing),
    whether the launch's words are a Dockerfile's JSON (not editable in place), and whether
    its assignments are the launch's environment."""

    text: str
    note: str | None = None
    json_words: bool = False
    #: Its assignments are the server's environment (a Dockerfile's `ENV`, a unit's
    #: `Environment=`), as `export` makes a script's.
    environment: bool = False


def service_text(text: str) -> ServiceText:
    """`text` with a unit's or a Dockerfile's launch made shell (module docstring)."""
    if "ExecStart=" in text and _EXEC_START.search(text):
        return _unit(text)
    if _FROM.search(text) and re.search(r"(?mi)^[ \t]*(?:CMD|ENTRYPOINT)\b", text):
        return _dockerfile(text)
    return ServiceText(text)


def _unit(text: str) -> ServiceText:
    lines = text.splitlines(keepends=True)
    sections = bool(_SECTION.search(text))
    out: list[str] = []
    continued = False
    for line in lines:
        body = line.rstrip("\r\n")
        m = _EXEC_START.match(line)
        if m is not None:
            out.append(blanked(m.group(1)) + line[m.end(1) :])
            continued = body.endswith("\\")
        elif continued:
            out.append(line)
            continued = body.endswith("\\")
        elif (e := _ENVIRONMENT.match(line)) is not None:
            out.append(blanked(e.group()) + line[e.end() :].replace('"', " "))
        elif sections and _UNIT_KEY.match(body):
            out.append(blanked(line))
        else:
            out.append(line)
    note = "a systemd unit's ExecStart= is read as its command, Environment= as its environment"
    return ServiceText("".join(out), note, environment=True)


def _dockerfile(text: str) -> ServiceText:
    lines = text.splitlines(keepends=True)
    out: list[str] = []
    json_words = False
    i = 0
    while i < len(lines):
        # An instruction and its continuation lines.
        j = i
        while lines[j].rstrip("\r\n").endswith("\\") and j + 1 < len(lines):
            j += 1
        block = "".join(lines[i : j + 1])
        m = _INSTRUCTION.match(block)
        word = m.group(1).upper() if m is not None else ""
        if word in ("CMD", "ENTRYPOINT"):
            rest = block[m.end() :] if m is not None else block
            head = blanked(block[: m.end()]) if m is not None else ""
            stripped = rest.strip()
            if stripped.startswith("[") and stripped.rstrip("\\").rstrip().endswith("]"):
                json_words = True
                rest = _json_as_words(rest)
                following = lines[j + 1] if j + 1 < len(lines) else ""
                if word == "ENTRYPOINT" and re.match(r"[ \t]*CMD\b", following, re.I):
                    rest = _continued(rest)  # Docker appends CMD to ENTRYPOINT
            out.append(head + rest)
        elif word in ("ENV", "ARG") and m is not None:  # ARG: the build's, read as ENV's
            out.append(blanked(block[: m.end()]) + block[m.end() :])
        elif block.lstrip().startswith("#") or not block.strip():
            out.append(block)
        else:
            out.append(blanked(block))
        i = j + 1
    note = "a Dockerfile's CMD/ENTRYPOINT is read as its command, ENV as its environment"
    return ServiceText("".join(out), note, json_words, environment=True)


def _json_as_words(rest: str) -> str:
    """An exec form's `[ "a", "b" ]` as the quoted words `  "a"  "b"  `: brackets and the
    commas between strings blanked, the strings and continuations kept."""
    chars = list(rest)
    in_string = False
    i = 0
    while i < len(chars):
        c = chars[i]
        if in_string:
            if c == "\\" and i + 1 < len(chars) and chars[i + 1] != "\n":
                i += 2
                continue
            if c == '"':
                in_string = False
        elif c == '"':
            in_string = True
        elif c in "[],":
            chars[i] = " "
        i += 1
    return "".join(chars)


def _continued(words: str) -> str:
    """The words of an `ENTRYPOINT` made to continue onto the next line (its last blank
    before the newline becomes `\\`)."""
    body = words.rstrip("\r\n")
    end = body.rstrip()
    if len(end) < len(body):
        return end + " " * (len(body) - len(end) - 1) + "\\" + words[len(body) :]
    return words
