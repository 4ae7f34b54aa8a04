"""Loading ``jsonschema`` (the MCP client's output-schema validator) without its seconds-long stall.

The MCP client validates every structured tool result against the tool's output schema with
``jsonschema``, imported on the first such result. ``import jsonschema`` imports its format checkers,
and when the optional ``rfc3987_syntax`` is installed (``jsonschema[format-nongpl]``, which
``jupyter-events`` requires) that builds an Earley parser for the RFC 3987 IRI grammar at import:
3-7 s on a loaded 2-core machine, paid in every process on its first structured call. The client
never checks formats (it builds its validators without a format checker), so the grammar is not
needed to validate a result.

:func:`import_jsonschema` imports ``jsonschema`` with ``rfc3987_syntax`` standing in as a small
module whose ``is_valid_syntax`` loads the real one on its first call. Validation is unchanged, and
so are the ``iri`` / ``iri-reference`` format checks of any ``jsonschema.FormatChecker``: the first
such check pays for the grammar instead of the import. The stand-in is removed from
``sys.modules`` once ``jsonschema`` is imported, so ``import rfc3987_syntax`` elsewhere gets the
real module.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
import threading
import types
from typing import Any

_GRAMMAR_MODULE = "rfc3987_syntax"


class _StandIn(types.ModuleType):
    """``rfc3987_syntax`` until it is used: its attributes load the real module."""

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):  # the import system probing the module (``__path__``, ...)
            raise AttributeError(name)
        return getattr(_real_grammar_module(), name)


def _real_grammar_module() -> Any:
    if isinstance(sys.modules.get(_GRAMMAR_MODULE), _StandIn):
        del sys.modules[_GRAMMAR_MODULE]
    return importlib.import_module(_GRAMMAR_MODULE)


def _is_valid_syntax(term: str, value: str) -> bool:
    """``rfc3987_syntax.is_valid_syntax``, loading the grammar on its first call."""
    return bool(_real_grammar_module().is_valid_syntax(term, value))


def import_jsonschema() -> None:
    """Import ``jsonschema`` with the IRI grammar of ``rfc3987_syntax`` deferred to its first use.

    Does nothing when ``jsonschema`` is already imported; a plain import when ``rfc3987_syntax`` is
    already imported or not installed.
    """
    with _importing:
        _import_jsonschema()


def import_jsonschema_in_background() -> None:
    """Start :func:`import_jsonschema` in a thread, once per process (a connection whose tools
    have output schemas calls it, so the first structured result of a process does not wait for it:
    an approval flow resumed in a fresh process would otherwise pay it right after the approval).
    """
    global _started
    with _starting:
        if _started or "jsonschema" in sys.modules:
            return
        _started = True
    threading.Thread(target=import_jsonschema, name="ipybox-import-jsonschema", daemon=True).start()


def jsonschema_imported() -> bool:
    """Whether ``jsonschema`` is imported and no import of it is under way (using it cannot block)."""
    if not _importing.acquire(blocking=False):
        return False
    try:
        return "jsonschema" in sys.modules
    finally:
        _importing.release()


_importing = threading.RLock()  # one import at a time: a caller waits for one under way
_starting = threading.Lock()
_started = False


def _import_jsonschema() -> None:
    if "jsonschema" in sys.modules:
        return
    if _GRAMMAR_MODULE in sys.modules or importlib.util.find_spec(_GRAMMAR_MODULE) is None:
        importlib.import_module("jsonschema")
        return
    stand_in = _StandIn(_GRAMMAR_MODULE, "Loads the real rfc3987_syntax on first use.")
    stand_in.is_valid_syntax = _is_valid_syntax  # type: ignore[attr-defined]
    sys.modules[_GRAMMAR_MODULE] = stand_in
    try:
        importlib.import_module("jsonschema")
    finally:
        if sys.modules.get(_GRAMMAR_MODULE) is stand_in:
            del sys.modules[_GRAMMAR_MODULE]
