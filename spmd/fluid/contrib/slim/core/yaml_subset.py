"""The YAML that slim's compression configs are written in, read without PyYAML (not a
dependency of spmd): block mappings and sequences by indentation, flow lists and mappings
([a, [b, c]], {k: v}, spanning lines while brackets are open), quoted and plain scalars with
PyYAML's YAML 1.1 types (int, float with a dot, bool true/false/yes/no/on/off, null/~),
comments. Anchors, tags, multi-documents and block scalars (| >) are refused by name.

>>> load_text("version: 1.0\\npruners:\\n  p1:\\n    class: 'StructurePruner'\\n"
...           "    pruning_axis:\\n      '*': 0\\ncompressor:\\n  epoch: 2\\n"
...           "  strategies:\\n  - s1  # a comment\\n")
{'version': 1.0, 'pruners': {'p1': {'class': 'StructurePruner', 'pruning_axis': {'*': 0}}}, \
'compressor': {'epoch': 2, 'strategies': ['s1']}}
>>> load_text("pairs: [['a', \\"b\\"], [c, 1]]\\nflag: yes\\nnothing: ~\\nrate: 1e-3")
{'pairs': [['a', 'b'], ['c', 1]], 'flag': True, 'nothing': None, 'rate': '1e-3'}
"""
from __future__ import annotations

import re

__all__ = ["YamlSubsetError", "load", "load_text"]

_INT = re.compile(r"^[-+]?(0|[1-9][0-9_]*)$")
_FLOAT = re.compile(r"^[-+]?([0-9][0-9_]*)?\.[0-9_]*([eE][-+][0-9]+)?$")
_BOOLS = {"true": True, "yes": True, "on": True, "false": False, "no": False, "off": False}
_NULLS = {"", "~", "null", "Null", "NULL"}


class YamlSubsetError(ValueError):
    """A config slim's reader cannot take: says the file, the line and why."""


def load(path):
    """The document in the file at `path`."""
    with open(path, encoding="utf-8") as f:
        return load_text(f.read(), str(path))


def load_text(text, where="<string>"):
    """The document in `text` (a mapping, a sequence or a scalar; None when empty)."""
    lines = _logical_lines(text, where)
    if not lines:
        return None
    value, end = _Parser(lines, where).block(0, lines[0][1])
    if end != len(lines):
        lineno = lines[end][0]
        raise YamlSubsetError(f"{where}:{lineno}: unexpected indentation (a line less indented "
                              f"than the document's first, or a stray key)")
    return value


def _strip_comment(line):
    quote = None
    for i, ch in enumerate(line):
        if quote:
            if ch == quote:
                quote = None
        elif ch in "'\"" and (i == 0 or line[i - 1] in " \t[{,:-"):
            quote = ch
        elif ch == "#" and (i == 0 or line[i - 1] in " \t"):
            return line[:i].rstrip()
    return line.rstrip()


def _open_brackets(text):
    depth, quote = 0, None
    for ch in text:
        if quote:
            if ch == quote:
                quote = None
        elif ch in "'\"":
            quote = ch
        elif ch in "[{":
            depth += 1
        elif ch in "]}":
            depth -= 1
    return depth


def _logical_lines(text, where):
    """(line number, indent, content) of each non-blank line, a flow value open at a line's
    end joined with the lines that close it."""
    out = []
    raw = text.splitlines()
    i = 0
    while i < len(raw):
        line = _strip_comment(raw[i].replace("\t", "    "))
        lineno = i + 1
        i += 1
        content = line.strip()
        if not content:
            continue
        if content in ("---", "...") or content.startswith("%"):
            if content == "---" and not out:
                continue
            raise YamlSubsetError(f"{where}:{lineno}: directives and multiple documents are "
                                  f"not in slim's config format")
        while _open_brackets(content) > 0 and i < len(raw):
            content += " " + _strip_comment(raw[i]).strip()
            i += 1
        out.append((lineno, len(line) - len(line.lstrip(" ")), content))
    return out


def _split_key(content):
    """(key, rest) of a 'key: rest' line, or None when the line is no mapping entry."""
    quote = None
    for i, ch in enumerate(content):
        if quote:
            if ch == quote:
                quote = None
        elif ch in "'\"" and i == 0:
            quote = ch
        elif ch in "[{" and i == 0:
            return None
        elif ch == ":" and (i + 1 == len(content) or content[i + 1] == " "):
            return content[:i].strip(), content[i + 1:].strip()
    return None


class _Parser:
    def __init__(self, lines, where):
        self.lines = lines
        self.where = where

    def fail(self, index, why):
        lineno = self.lines[min(index, len(self.lines) - 1)][0]
        raise YamlSubsetError(f"{self.where}:{lineno}: {why}")

    def block(self, i, indent):
        content = self.lines[i][2]
        if content == "-" or content.startswith("- "):
            return self.sequence(i, indent)
        if _split_key(content) is not None:
            return self.mapping(i, indent)
        value = self.scalar(content, i)
        return value, i + 1

    def nested(self, i, parent_indent, allow_same_indent_sequence):
        """The value of an entry whose text is empty: the deeper block that follows (or a
        sequence at the same indent, as YAML allows under a mapping key), else null."""
        if i < len(self.lines):
            _, indent, content = self.lines[i]
            if indent > parent_indent:
                return self.block(i, indent)
            if (allow_same_indent_sequence and indent == parent_indent
                    and (content == "-" or content.startswith("- "))):
                return self.sequence(i, indent)
        return None, i

    def mapping(self, i, indent):
        result = {}
        while i < len(self.lines) and self.lines[i][1] == indent:
            content = self.lines[i][2]
            entry = _split_key(content)
            if entry is None:
                if content == "-" or content.startswith("- "):
                    break  # the end of a same-indent sequence's mapping item
                self.fail(i, f"expected 'key: value', got {content!r}")
            key, rest = entry
            key = self.scalar(key, i) if key[:1] in "'\"" else key
            if rest[:1] in ("|", ">", "&", "*", "!"):
                self.fail(i, f"{rest[:1]!r} (block scalars, anchors, aliases, tags) is not in "
                             f"slim's config format")
            if rest:
                result[key] = self.scalar(rest, i)
                i += 1
            else:
                result[key], i = self.nested(i + 1, indent, True)
        if i < len(self.lines) and self.lines[i][1] > indent:
            self.fail(i, "unexpected indentation")
        return result, i

    def sequence(self, i, indent):
        result = []
        while i < len(self.lines) and self.lines[i][1] == indent:
            content = self.lines[i][2]
            if not (content == "-" or content.startswith("- ")):
                break
            rest = content[1:].strip()
            if not rest:
                value, i = self.nested(i + 1, indent, False)
            elif _split_key(rest) is not None or rest == "-" or rest.startswith("- "):
                # '- key: value' opens a mapping whose keys line up with 'key', '- - x' a
                # sequence whose items line up with the second dash
                inner = indent + (len(content) - len(rest))
                lines = list(self.lines)
                lines[i] = (lines[i][0], inner, rest)
                sub = _Parser(lines, self.where)
                value, i = sub.block(i, inner)
            else:
                value = self.scalar(rest, i)
                i += 1
            result.append(value)
        return result, i

    # -- scalars and flow collections --------------------------------------------------------
    def scalar(self, text, i):
        text = text.strip()
        if text[:1] in "[{":
            value, end = self.flow(text, 0, i)
            if text[end:].strip():
                self.fail(i, f"text after a flow collection: {text[end:].strip()!r}")
            return value
        if text[:1] in "'\"":
            value, end = self.quoted(text, 0, i)
            if text[end:].strip():
                self.fail(i, f"text after a quoted string: {text[end:].strip()!r}")
            return value
        return _plain(text)

    def quoted(self, text, start, i):
        quote = text[start]
        out = []
        j = start + 1
        while j < len(text):
            ch = text[j]
            if ch == quote:
                if quote == "'" and text[j + 1:j + 2] == "'":
                    out.append("'")
                    j += 2
                    continue
                return "".join(out), j + 1
            if quote == '"' and ch == "\\" and j + 1 < len(text):
                nxt = text[j + 1]
                out.append({"n": "\n", "t": "\t", "\\": "\\", '"': '"', "0": "\0"}.get(
                    nxt, "\\" + nxt))
                j += 2
                continue
            out.append(ch)
            j += 1
        self.fail(i, f"unterminated {quote} string")

    def flow(self, text, start, i):
        """The flow list or mapping opening at text[start]; (value, index after it)."""
        closing = "]" if text[start] == "[" else "}"
        is_map = closing == "}"
        items = {} if is_map else []
        j = start + 1
        while True:
            while j < len(text) and text[j] == " ":
                j += 1
            if j >= len(text):
                self.fail(i, f"unclosed {text[start]!r}")
            if text[j] == closing:
                return items, j + 1
            key = None
            if is_map:
                key, j = self.flow_item(text, j, i, ":")
                if j >= len(text) or text[j] != ":":
                    self.fail(i, "a flow mapping entry needs 'key: value'")
                j += 1
                while j < len(text) and text[j] == " ":
                    j += 1
            value, j = self.flow_item(text, j, i, ",")
            if is_map:
                items[key] = value
            else:
                items.append(value)
            while j < len(text) and text[j] == " ":
                j += 1
            if j < len(text) and text[j] == ",":
                j += 1
            elif j < len(text) and text[j] != closing:
                self.fail(i, f"expected ',' or {closing!r} in a flow collection")

    def flow_item(self, text, j, i, stop):
        if text[j] in "[{":
            return self.flow(text, j, i)
        if text[j] in "'\"":
            return self.quoted(text, j, i)
        end = j
        stops = {stop, "]", "}"} if stop == "," else {":", ",", "]", "}"}
        while end < len(text) and text[end] not in stops:
            end += 1
        return _plain(text[j:end].strip()), end


def _plain(text):
    """A plain scalar as PyYAML's YAML 1.1 resolver types it."""
    if text in _NULLS:
        return None
    lowered = text.lower()
    if lowered in _BOOLS and text in (lowered, lowered.capitalize(), lowered.upper()):
        return _BOOLS[lowered]
    if _INT.match(text):
        return int(text.replace("_", ""))
    if _FLOAT.match(text) and any(c.isdigit() for c in text):
        return float(text.replace("_", ""))
    if lowered in (".inf", "+.inf"):
        return float("inf")
    if lowered == "-.inf":
        return float("-inf")
    if lowered == ".nan":
        return float("nan")
    if text[:1] in ("&", "*", "!", "|", ">"):
        raise YamlSubsetError(f"{text!r}: anchors, aliases, tags and block scalars are not in "
                              f"slim's config format")
    return text
