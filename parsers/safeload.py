"""Loading untrusted structured data safely: depth-bounded JSON, a pickle loader that admits no globals, hardened XML."""
from __future__ import annotations

import io
import json
import pickle
import re
import struct
import xml.etree.ElementTree as ET

MAX_JSON_DEPTH = 64

# A whole string, or a bracket, or a quote that opens a string never closed (unrolled loop: linear time).
_JSON_TOKEN_RE = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"|[\[\]{}]|"', re.S)
_DOCTYPE_RE = re.compile(r"<!DOCTYPE\b[^>\[]*>", re.I)


class UnsafeInput(ValueError):
    """Content refused because loading it could be dangerous or unbounded (deep nesting, globals, entities)."""


def json_depth(text: str) -> int:
    """Deepest nesting of arrays/objects in a JSON text, ignoring brackets inside strings (no parsing, no recursion)."""
    depth = deepest = 0
    for m in _JSON_TOKEN_RE.finditer(text):
        tok = m.group()
        if tok == '"':
            # An unterminated string: json.loads stops there, so nothing after it can nest. Stopping here also
            # keeps the scan linear (retrying the string pattern from every later quote was quadratic).
            break
        if tok in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif tok in "]}":
            depth -= 1
    return deepest


def loads_json(data: bytes | str, max_depth: int = MAX_JSON_DEPTH, strict: bool = True):
    """json.loads, refusing documents nested deeper than `max_depth` (the stock parser recurses per level).
    strict=False lets raw control characters (a terminal's escape codes written unescaped) stand inside strings."""
    text = data.decode("utf-8", "replace") if isinstance(data, bytes) else data
    deepest = json_depth(text)
    if deepest > max_depth:
        raise UnsafeInput(f"JSON nested {deepest} levels deep (limit {max_depth}); not loaded")
    return json.loads(text, strict=strict)


class _NoGlobalsUnpickler(pickle._Unpickler):  # noqa: SLF001 - the pure-Python unpickler, on purpose
    """An unpickler for plain containers and scalars only: every class/function lookup is refused.

    The pure-Python unpickler, not the C one: the C unpickler sizes its memo array by the largest memo index a
    pickle names, so an 800-byte pickle with `LONG_BINPUT 4000000000` makes it allocate and zero tens of GiB.
    Its memo here is a dict. BYTEARRAY8 (a zero-filled allocation of a declared size) and out-of-band buffers
    are refused: flight-recorder dumps never contain them.
    """

    dispatch = dict(pickle._Unpickler.dispatch)  # noqa: SLF001

    def _refuse_buffers(self):
        raise UnsafeInput("pickle holds bytearrays or out-of-band buffers; not loaded")

    for _op in (pickle.BYTEARRAY8, pickle.NEXT_BUFFER, pickle.READONLY_BUFFER):
        dispatch[_op[0]] = _refuse_buffers
    del _op

    def find_class(self, module: str, name: str):
        raise UnsafeInput(f"pickle refers to {module}.{name}; only plain containers and scalars are loaded")

    def persistent_load(self, pid):
        raise UnsafeInput("pickle uses persistent ids; not loaded")


def loads_pickle_restricted(data: bytes):
    """Unpickle plain data (dict/list/tuple/str/bytes/int/float/bool/None); anything naming a global is refused."""
    try:
        return _NoGlobalsUnpickler(io.BytesIO(data)).load()
    except UnsafeInput:
        raise
    except RecursionError as exc:
        raise UnsafeInput("pickle nested too deeply") from exc
    except (pickle.UnpicklingError, EOFError, ValueError, TypeError, KeyError, IndexError, AttributeError,
            UnicodeDecodeError, OverflowError, MemoryError, struct.error) as exc:  # struct: a cut-off argument
        raise ValueError(f"corrupt or truncated pickle: {type(exc).__name__}: {exc}") from exc


def parse_xml_hardened(text: str) -> ET.Element:
    """Parse XML with entity declarations refused and a plain external DOCTYPE stripped (no DTD is ever fetched)."""
    if re.search(r"<!ENTITY", text, re.I):
        raise UnsafeInput("XML declares entities (possible entity-expansion attack); not parsed")
    if re.search(r"<!DOCTYPE[^>]*\[", text, re.I):
        raise UnsafeInput("XML has an internal DTD subset; not parsed")
    text = _DOCTYPE_RE.sub("", text, count=1)
    if "<!DOCTYPE" in text.upper():
        raise UnsafeInput("XML has more than one DOCTYPE; not parsed")
    try:
        return ET.fromstring(text)
    except ET.ParseError as exc:
        raise ValueError(f"malformed XML: {exc}") from exc
