"""The backends: the ways of running slidewin's commands on a server, in
the order a limiter tries them (the module, the FUNCTION library, its EVAL
form), and how each reads a refusal: absent (try the next one), lost
(install it again), or a module older than this client (`outdated`: an
error naming what it lacks, never a silent fall back)."""

import functools
import hashlib
import os
import re
from typing import List, Optional, Sequence, Tuple

import redis

from . import decision as d
from .errors import SlidewinModuleError

LIBRARY_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "slidewin.lua")


def library_code() -> str:
    """The FUNCTION library shipped in the package (lua/slidewin.lua)."""
    with open(LIBRARY_PATH, encoding="utf-8") as f:
        return f.read()


EVAL_FRAME_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "slidewin-eval.lua")


@functools.lru_cache(maxsize=1)
def eval_code() -> str:
    """The library's EVAL form, for servers without FUNCTION, as
    scripts/eval-script.sh prints it: the frame (lua/slidewin-eval.lua)
    with the library, less its `#!lua` line, in place of `-- @LIBRARY@`."""
    with open(EVAL_FRAME_PATH, encoding="utf-8") as f:
        frame = f.read()
    library = library_code().split("\n", 1)[1]
    return "".join(library if line == "-- @LIBRARY@\n" else line for line in frame.splitlines(keepends=True))


@functools.lru_cache(maxsize=1)
def eval_sha() -> str:
    """The SHA-1 EVALSHA names the EVAL form by."""
    return hashlib.sha1(eval_code().encode("utf-8")).hexdigest()


def is_unknown_command(e: Exception) -> bool:
    """Whether `e` says the server does not know one of slidewin's commands
    (`SLIDEWIN.*`, or `FCALL slidewin_*` on a server without FUNCTION): its
    "unknown command" reply, or a cluster client's refusal to route a
    command its COMMAND table lacks."""
    text = str(e).lower()
    return "slidewin" in text and ("unknown command" in text or "doesn't exist in redis commands" in text)


# -- the backends: who answers, in the order the limiter tries them --------

#: The backends' names, for `Limiter(backends=...)`.
MODULE, FUNCTION_LIBRARY, SCRIPT = "module", "function", "script"


class Backend:
    """One way of running slidewin's commands on the server. `loads`: the
    command that installs it (sent once to every primary before its first
    use; None: nothing to install)."""

    name = ""
    source = ""
    loads: Optional[list] = None

    def __init__(self):
        self.installed = self.loads is None
        self.reinstalled = False
        self.install_error: Optional[Exception] = None

    def absent(self, e: Exception) -> bool:
        """Whether `e` says this backend cannot answer on this server (the
        limiter then tries the next one)."""
        return is_unknown_command(e)

    def lost(self, e: Exception) -> bool:
        """Whether `e` says what `loads` installed is gone (installed again, once)."""
        return False

    def why_absent(self, e: Exception) -> str:
        return f"{self.name}: {e}"

    # A call with a request id asks for DETAIL (the server refuses ID with
    # WITHMEMBERS: the charge is given back by its id, not its members).

    def check(self, rule, cost: int, request_id=None, shadow: bool = False) -> list:
        raise NotImplementedError

    def check_all(self, rules: Sequence, cost: int, request_id=None, shadow: bool = False) -> list:
        raise NotImplementedError

    def peek(self, rule, cost: int) -> list:
        raise NotImplementedError

    def undo(self, key, members: Sequence[str]) -> list:
        raise NotImplementedError

    def undo_id(self, key, request_id) -> list:
        """UNDO key ID request-id."""
        raise NotImplementedError

    def settle(self, key, request_id, cost: int) -> list:
        """SETTLE key ID request-id COST units."""
        raise NotImplementedError


def _charge_options(cost: int, request_id, detail: bool = False, shadow: bool = False) -> list:
    """COST, then ID and DETAIL for a call with a request id, else
    WITHMEMBERS (CHECK's implies DETAIL; MCHECK's is given with `detail`);
    SHADOW for a shadow call."""
    tail = ["SHADOW"] if shadow else []
    if request_id is None:
        return ["COST", cost] + (["DETAIL"] if detail else []) + ["WITHMEMBERS"] + tail
    return ["COST", cost, "ID", request_id, "DETAIL"] + tail


class ModuleBackend(Backend):
    """The module's commands, SLIDEWIN.*."""

    name, source = MODULE, d.REDIS

    def why_absent(self, e: Exception) -> str:
        return f"the slidewin module is not loaded ({e})"

    def check(self, rule, cost, request_id=None, shadow=False):
        return ["SLIDEWIN.CHECK", rule.key, rule.limit, rule.window_ms] + _charge_options(cost, request_id, shadow=shadow)

    def check_all(self, rules, cost, request_id=None, shadow=False):
        flat = [x for r in rules for x in (r.key, r.limit, r.window_ms)]
        return ["SLIDEWIN.MCHECK", len(rules)] + flat + _charge_options(cost, request_id, detail=True, shadow=shadow)

    def peek(self, rule, cost):
        return ["SLIDEWIN.PEEK", rule.key, rule.limit, rule.window_ms, "COST", cost]

    def undo(self, key, members):
        return ["SLIDEWIN.UNDO", key] + list(members)

    def undo_id(self, key, request_id):
        return ["SLIDEWIN.UNDO", key, "ID", request_id]

    def settle(self, key, request_id, cost):
        return ["SLIDEWIN.SETTLE", key, "ID", request_id, "COST", cost]


class FunctionBackend(Backend):
    """The FUNCTION library shipped in the package (`FCALL slidewin_*`),
    installed with `FUNCTION LOAD REPLACE` on every primary. If the load is
    refused (no `@scripting` rights), the calls are tried anyway: an
    administrator may have loaded the library."""

    name, source = FUNCTION_LIBRARY, d.FUNCTION

    @property
    def loads(self):  # read when needed: the file is read once, not at import
        return ["FUNCTION", "LOAD", "REPLACE", library_code()]

    def __init__(self):
        super().__init__()
        self.installed = False

    def lost(self, e):
        return "function not found" in str(e).lower()

    def absent(self, e):
        # Refused (NOPERM) after its load was refused too: this user cannot
        # use the library; the next backend, or SlidewinModuleError.
        refused = self.install_error is not None and isinstance(e, redis.exceptions.NoPermissionError)
        return is_unknown_command(e) or self.lost(e) or refused

    def why_absent(self, e):
        if self.install_error is not None:
            return f"FUNCTION LOAD of the slidewin library was refused ({self.install_error}), and calling it failed too ({e})"
        return f"the FUNCTION library cannot answer ({e})"

    def check(self, rule, cost, request_id=None, shadow=False):
        return ["FCALL", "slidewin_check", 1, rule.key, rule.limit, rule.window_ms] + _charge_options(cost, request_id, shadow=shadow)

    def check_all(self, rules, cost, request_id=None, shadow=False):
        limits = [x for r in rules for x in (r.limit, r.window_ms)]
        keys = [r.key for r in rules]
        return ["FCALL", "slidewin_mcheck", len(rules)] + keys + limits + _charge_options(cost, request_id, detail=True, shadow=shadow)

    def peek(self, rule, cost):
        return ["FCALL_RO", "slidewin_peek", 1, rule.key, rule.limit, rule.window_ms, "COST", cost]

    def undo(self, key, members):
        return ["FCALL", "slidewin_undo", 1, key] + list(members)

    def undo_id(self, key, request_id):
        return ["FCALL", "slidewin_undo", 1, key, "ID", request_id]

    def settle(self, key, request_id, cost):
        return ["FCALL", "slidewin_settle", 1, key, "ID", request_id, "COST", cost]


class ScriptBackend(FunctionBackend):
    """The same library in its EVAL form (`eval_code()`), for servers
    without FUNCTION (Redis 6.x, services that allow EVAL only): installed
    with `SCRIPT LOAD` on every primary and called by `EVALSHA sha numkeys
    key ... function arg ...`, with the same replies (`source "function"`).

    A `NOSCRIPT` reply (a restart, a failover, `SCRIPT FLUSH`) installs it
    again and sends the call again: safe only because NOSCRIPT means the
    server ran nothing of the call, so nothing was charged."""

    name = SCRIPT

    @property
    def loads(self):
        return ["SCRIPT", "LOAD", eval_code()]

    def lost(self, e):
        # redis-py turns the NOSCRIPT reply into NoScriptError.
        return isinstance(e, redis.exceptions.NoScriptError) or str(e).upper().startswith("NOSCRIPT")

    def why_absent(self, e):
        if self.install_error is not None:
            return f"SCRIPT LOAD of the slidewin library's EVAL form was refused ({self.install_error}), and calling it failed too ({e})"
        return f"the EVAL form of the library cannot answer ({e})"

    @staticmethod
    def as_eval(fcall: list) -> list:
        """An FCALL (or FCALL_RO) as the EVAL form takes it."""
        name, numkeys = fcall[1], fcall[2]
        keys, args = fcall[3 : 3 + numkeys], fcall[3 + numkeys :]
        return ["EVALSHA", eval_sha(), numkeys] + keys + [name] + args

    def check(self, rule, cost, request_id=None, shadow=False):
        return self.as_eval(super().check(rule, cost, request_id, shadow))

    def check_all(self, rules, cost, request_id=None, shadow=False):
        return self.as_eval(super().check_all(rules, cost, request_id, shadow))

    def peek(self, rule, cost):
        return self.as_eval(super().peek(rule, cost))

    def undo(self, key, members):
        return self.as_eval(super().undo(key, members))

    def undo_id(self, key, request_id):
        return self.as_eval(super().undo_id(key, request_id))

    def settle(self, key, request_id, cost):
        return self.as_eval(super().settle(key, request_id, cost))


#: Every backend by name. The default chain is `DEFAULT_BACKENDS`.
BACKENDS = {MODULE: ModuleBackend, FUNCTION_LIBRARY: FunctionBackend, SCRIPT: ScriptBackend}
DEFAULT_BACKENDS = (MODULE, FUNCTION_LIBRARY, SCRIPT)


class Chain:
    """The backends in the order they are tried: the first that answers is
    used from then on; one whose commands the server does not know (or that
    cannot be installed) gives way to the next. When none is left,
    `SlidewinModuleError` names each one and why it could not answer."""

    def __init__(self, names: Sequence[str]):
        names = tuple(names)
        unknown = [n for n in names if n not in BACKENDS]
        if not names or unknown or len(set(names)) != len(names):
            raise ValueError(f"backends must be distinct names among {tuple(BACKENDS)}, in the order to try them; got {names!r}")
        self.names = names
        self.backends = [BACKENDS[n]() for n in names]
        self.index = 0
        self.reasons: List[str] = []

    def current(self) -> Backend:
        if self.index >= len(self.backends):
            off = [n for n in BACKENDS if n not in self.names]
            tail = f"; not tried (backends={self.names!r}): {', '.join(off)}" if off else ""
            raise SlidewinModuleError("slidewin cannot answer on this server: " + "; ".join(self.reasons) + tail)
        return self.backends[self.index]

    def after_error(self, backend: Backend, e: Exception) -> None:
        """`backend`'s call failed with `e` (a reply: the server ran nothing
        that charged, or the error is the caller's): returns to have the
        call tried again, installed again once when what `loads` installed
        was lost, or on the next backend when this one cannot answer;
        raises `e` otherwise."""
        if backend.lost(e) and not backend.reinstalled and backend.install_error is None:
            backend.installed, backend.reinstalled = False, True
            return
        if not backend.absent(e):
            raise e
        self.give_up(backend, e)

    def give_up(self, backend: Backend, e: Exception) -> None:
        """`backend` cannot answer: the next one is tried (once per backend,
        whichever thread sees it first)."""
        if self.index < len(self.backends) and self.backends[self.index] is backend:
            self.reasons.append(backend.why_absent(e))
            self.index += 1


# -- a module older than this client -------------------------------------------

#: The name the module registers (MODULE LIST's `name`).
MODULE_NAME = "slidewin"


def lacking(backend: Backend, e: Exception) -> Optional[Tuple[str, str]]:
    """What the module lacks when `e` is its refusal of something this
    client sent (a command it does not know, `unknown command
    'SLIDEWIN.SETTLE'`, or an option, `unknown option 'SHADOW'`), else
    None; ("command", "SLIDEWIN.SETTLE") or ("option", "SHADOW"). Only
    the module's replies are read: the client builds every
    command itself, so an unknown option is never the caller's."""
    if not isinstance(backend, ModuleBackend) or not isinstance(e, redis.exceptions.ResponseError):
        return None
    text = str(e)
    option = re.match(r"^(?:ERR )?unknown option '([^']*)'", text)
    if option:
        return "option", option.group(1)
    command = re.match(r"^(?:ERR )?unknown command '(slidewin\.[a-z]+)'", text, re.IGNORECASE)
    if command:
        return "command", command.group(1).upper()
    return None


def _text(x) -> str:
    return x.decode("utf-8", "replace") if isinstance(x, bytes) else str(x)


def module_in_list(reply) -> Optional[int]:
    """The slidewin module's `ver` in a MODULE LIST reply (RESP2: a list
    of flat name/value lists; RESP3: a list of maps), None when it is not
    loaded."""
    for entry in reply or ():
        if isinstance(entry, dict):
            fields = {_text(k): v for k, v in entry.items()}
        else:
            fields = {_text(k): v for k, v in zip(entry[::2], entry[1::2])}
        if _text(fields.get("name", "")) == MODULE_NAME:
            return int(fields.get("ver", 0))
    return None


def version_text(ver: Optional[int]) -> str:
    """A module version as MODULE LIST gives it (major * 10000 + minor *
    100 + patch) in words: `0.1.0 (MODULE LIST ver 100)`."""
    if ver is None:
        return "version unknown: MODULE LIST was refused"
    return f"version {ver // 10000}.{ver // 100 % 100}.{ver % 100} (MODULE LIST ver {ver})"


def outdated(what: Tuple[str, str], ver: Optional[int], e: Exception) -> SlidewinModuleError:
    """The error for a loaded module that lacks `what` (see `lacking`)."""
    kind, name = what
    return SlidewinModuleError(
        f"the slidewin module loaded on this server ({version_text(ver)}) has no {kind} {name}, which this client sent: "
        f"the module is older than the client (the server replied: {e}). Upgrade the module on every node "
        f"(docs/install.md); the client does not fall back to the FUNCTION library while the module is loaded."
    )
