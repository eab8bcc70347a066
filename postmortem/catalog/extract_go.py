"""Message extraction from Go sources (build time only): the kubelet's eviction and preemption messages and the
training operators' events and errors. klog/logr calls, fmt.Errorf/errors.New, event recorders, and string
constants whose names say they are messages or reasons."""
from __future__ import annotations

import re

from postmortem.catalog.extract import MAX_TEXT, Msg, literal_share, ph
from postmortem.catalog.extract_c import c_call_args

_GO_LIT = r'"(?:[^"\\\n]|\\.)*"|`[^`]*`'
_GO_VERB = re.compile(r"%[-+# 0]*(?:\*|\d+)?(?:\.(?:\*|\d+))?([vTtbcdoOqxXUeEfFgGsp%])")
# name -> (kind, index of the message argument, level)
_CALLS = {
    "Errorf": ("log", 0, "error"), "Error": ("log", 0, "error"), "ErrorS": ("log", 1, "error"),
    "Warningf": ("log", 0, "warning"), "Warning": ("log", 0, "warning"), "Infof": ("log", 0, "info"),
    "Info": ("log", 0, "info"), "InfoS": ("log", 0, "info"), "Fatalf": ("log", 0, "critical"),
    "Fatal": ("log", 0, "critical"), "Exitf": ("log", 0, "critical"),
}
_LOG_RECV = re.compile(r"\b(klog(?:\.V\(\d+\))?|log|logger|Log|r\.Log|glog)\.(" + "|".join(_CALLS) + r")\s*\(")
# (fmt.Sprintf builds strings of every kind; the messages it formats are found as the constants it is given)
_ERR_CALL = re.compile(r"\b(fmt\.Errorf|errors\.New|errors\.Errorf|errors\.Wrapf)\s*\(")
_EVENT_CALL = re.compile(r"\b\w*[Rr]ecorder\.(Eventf|Event)\s*\(")
_CONST = re.compile(r"^\s*(\w*(?:Message|Msg|Fmt|Reason|Format)\w*)\s*(?:string\s*)?=\s*(" + _GO_LIT + r")", re.M)


def _go_unquote(lit: str) -> str:
    if lit.startswith("`"):
        return lit[1:-1]
    return lit[1:-1].replace('\\"', '"').replace("\\n", " ").replace("\\t", " ").replace("\\\\", "\\")


def go_template(arg: str) -> str | None:
    """A Go format or string expression (`"a %s" + b`, adjacent concatenations) -> template; None without a
    literal."""
    parts = [p.strip() for p in re.split(r"\s\+\s(?=(?:[^\"]*\"[^\"]*\")*[^\"]*$)", arg)]
    out = []
    for p in parts:
        if re.fullmatch(_GO_LIT, p):
            out.append(_GO_VERB.sub(lambda m: "%" if m.group(1) == "%" else ph("%" + m.group(1)), _go_unquote(p)))
        else:
            out.append(ph(p))
    t = "".join(out)
    return t if any(re.fullmatch(_GO_LIT, p) for p in parts) else None


def _line(src: str, pos: int) -> int:
    return src.count("\n", 0, pos) + 1


def go_messages(lib: str, file: str, src: str) -> list[Msg]:
    """The logged, returned-as-error and event messages of one Go source, and its message constants."""
    out: list[Msg] = []

    def add(kind, arg, level, exc, pos):
        t = go_template(arg)
        if t and literal_share(t) >= 6 and sum(c.isalpha() for c in t) >= 0.5 * literal_share(t):
            out.append(Msg(lib, file, kind, t[:MAX_TEXT], level, exc, _line(src, pos)))
    for m in _LOG_RECV.finditer(src):
        kind, idx, level = _CALLS[m.group(2)]
        got = c_call_args(src, m.end() - 1)
        if got and len(got[0]) > idx:
            add(kind, got[0][idx], "debug" if ".V(" in m.group(1) else level, "", m.start())
    for m in _ERR_CALL.finditer(src):
        got = c_call_args(src, m.end() - 1)
        if got and got[0]:
            add("raise", got[0][0] if m.group(1) != "errors.Wrapf" or len(got[0]) < 2 else got[0][1], "error",
                "error", m.start())
    for m in _EVENT_CALL.finditer(src):
        got = c_call_args(src, m.end() - 1)
        if got and len(got[0]) >= 4:
            level = "warning" if "Warning" in got[0][1] else "info"
            add("event", got[0][3], level, got[0][2], m.start())
    for m in _CONST.finditer(src):
        text = _go_unquote(m.group(2))
        # a reason is one CamelCase word (Evicted, OOMKilled, DeadlineExceeded); a message reads as words
        if re.fullmatch(r"[A-Z][a-z]+(?:[A-Z][a-z]*)+|[A-Z][a-z]{5,}", text) and "Reason" in m.group(1) or \
                len(re.findall(r"[A-Za-z]{2,}", text)) >= 3:
            add("const", m.group(2), "", m.group(1), m.start())
    return out
