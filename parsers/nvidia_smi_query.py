"""`nvidia-smi -q` (indented text) and `-q -x` (XML) into plain per-GPU dicts: memory, power, ECC, retired pages,
remapped rows, processes. Used by postmortem.parsers.nvidia_smi, which turns them into rows."""
from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field

_NUM_RE = re.compile(r"^\s*(-?\d+(?:\.\d+)?)\s*([A-Za-z%]*)")
_UNIT_TO_MIB = {"mib": 1.0, "gib": 1024.0, "kib": 1 / 1024, "mb": 1.0, "gb": 1024.0, "b": 1 / 1024 ** 2}
HEALTH_KEYS = ("ecc_volatile_uncorrected", "ecc_volatile_corrected", "ecc_aggregate_uncorrected",
               "ecc_aggregate_corrected", "retired_sbe", "retired_dbe", "retired_pending",
               "remapped_correctable", "remapped_uncorrectable", "remap_pending", "remap_failure")


def number(text) -> float | None:
    """Leading number of a value like `40960 MiB`, `41 C`, `40.71 W`, `100 %`; None for N/A, [Not Supported], ERR!."""
    if text is None:
        return None
    m = _NUM_RE.match(str(text))
    return float(m.group(1)) if m else None


def mib(text) -> float | None:
    """A memory value in MiB (nvidia-smi prints MiB; other units converted)."""
    if text is None:
        return None
    m = _NUM_RE.match(str(text))
    if not m:
        return None
    return float(m.group(1)) * _UNIT_TO_MIB.get(m.group(2).lower(), 1.0)


def yes_no(text) -> bool | None:
    """`Yes`/`No` -> bool; anything else (N/A) -> None."""
    t = (text or "").strip().lower()
    return True if t == "yes" else False if t == "no" else None


def _int(text) -> int | None:
    v = number(text)
    return int(v) if v is not None else None


@dataclass
class Node:
    """One `Key : Value` or section line of `nvidia-smi -q`, with the lines indented under it."""
    key: str
    value: str | None
    line: int
    children: list["Node"] = field(default_factory=list)

    def get(self, *path: str) -> "Node | None":
        """The first descendant along `path` (keys compared case-insensitively)."""
        node: Node | None = self
        for key in path:
            k = key.lower()
            node = next((c for c in node.children if c.key.lower() == k), None) if node else None
        return node

    def val(self, *path: str) -> str | None:
        """The value at `path`, or None."""
        node = self.get(*path)
        return node.value if node else None


def q_tree(lines: list[tuple[int, str]]) -> Node:
    """Build the indentation tree of one `nvidia-smi -q` block (lines as (lineno, text))."""
    root = Node("", None, 0)
    stack: list[tuple[int, Node]] = [(-1, root)]
    for lineno, text in lines:
        if not text.strip() or text.lstrip().startswith("=====") or len(text) > 2000:
            continue  # real `-q` lines are short; a very long one is junk (and would make the key match slow)
        indent = len(text) - len(text.lstrip(" "))
        body = text.strip()
        # `Key<spaces>: Value` (or `Key :` when empty); found with str.find, not a lazy regex (linear on junk).
        sep = body.find(" :")
        if sep > 0 and (body[sep + 2:sep + 3] in ("", " ")):
            node = Node(body[:sep].strip(), body[sep + 2:].strip(), lineno)
        else:
            node = Node(body, None, lineno)
        while stack[-1][0] >= indent:
            stack.pop()
        stack[-1][1].children.append(node)
        stack.append((indent, node))
    return root


def _sum_uncorrectable(section: Node | None, word: str) -> int | None:
    """Uncorrectable (or correctable) ECC count of a Volatile/Aggregate section in any driver's layout."""
    if section is None:
        return None
    bit = section.get("Double Bit" if word == "uncorrectable" else "Single Bit")
    if bit is not None:  # pre-Ampere: Single Bit / Double Bit with a Total line
        return _int(bit.val("Total"))
    total, seen = 0, False
    for child in section.children:
        key = child.key.lower()
        if word in key and (word != "correctable" or "uncorrectable" not in key) and "threshold" not in key:
            v = _int(child.value)
            if v is not None:
                total, seen = total + v, True
    return total if seen else None


def _q_gpu(node: Node) -> dict:
    retired = node.get("Retired Pages")
    remap = node.get("Remapped Rows")
    ecc = node.get("ECC Errors")
    power = node.get("GPU Power Readings") or node.get("Power Readings")
    health = {
        "ecc_volatile_uncorrected": _sum_uncorrectable(ecc.get("Volatile") if ecc else None, "uncorrectable"),
        "ecc_volatile_corrected": _sum_uncorrectable(ecc.get("Volatile") if ecc else None, "correctable"),
        "ecc_aggregate_uncorrected": _sum_uncorrectable(ecc.get("Aggregate") if ecc else None, "uncorrectable"),
        "ecc_aggregate_corrected": _sum_uncorrectable(ecc.get("Aggregate") if ecc else None, "correctable"),
        "retired_sbe": _int(retired.val("Single Bit ECC")) if retired else None,
        "retired_dbe": _int(retired.val("Double Bit ECC")) if retired else None,
        "retired_pending": yes_no(retired.val("Pending Page Blacklist") or retired.val("Pending")) if retired else None,
        "remapped_correctable": _int(remap.val("Correctable Error")) if remap else None,
        "remapped_uncorrectable": _int(remap.val("Uncorrectable Error")) if remap else None,
        "remap_pending": yes_no(remap.val("Pending")) if remap else None,
        "remap_failure": yes_no(remap.val("Remapping Failure Occurred")) if remap else None,
    }
    draw = None
    if power is not None:
        draw = number(power.val("Power Draw")) or number(power.val("Instant Power Draw")) \
            or number(power.val("Average Power Draw"))
    procs = []
    pnode = node.get("Processes")
    for child in (pnode.children if pnode else []):
        if child.key.lower() == "process id":
            procs.append({"pid": _int(child.value), "type": child.val("Type"), "name": child.val("Name"),
                          "used_mib": mib(child.val("Used GPU Memory"))})
    return {"line": node.line, "bus_id": node.key.split(None, 1)[1] if " " in node.key else None,
            "name": node.val("Product Name"),
            "mem_used_mib": mib(node.val("FB Memory Usage", "Used")),
            "mem_total_mib": mib(node.val("FB Memory Usage", "Total")),
            "util_pct": number(node.val("Utilization", "Gpu")),
            "temp_c": number(node.val("Temperature", "GPU Current Temp")),
            "power_w": draw, "processes": procs, "health": health}


def gpus_from_q(lines: list[tuple[int, str]]) -> tuple[dict, list[dict]]:
    """Header facts (timestamp, driver/cuda version, attached GPUs) and per-GPU dicts of one `-q` block."""
    root = q_tree(lines)
    header = {"timestamp": root.val("Timestamp"), "driver_version": root.val("Driver Version"),
              "cuda_version": root.val("CUDA Version"), "attached_gpus": _int(root.val("Attached GPUs"))}
    gpus = [_q_gpu(c) for c in root.children if re.match(r"^GPU [0-9A-Fa-f]+:", c.key)]
    return header, gpus


def _x(el: ET.Element | None, path: str) -> str | None:
    if el is None:
        return None
    found = el.find(path)
    return found.text.strip() if found is not None and found.text else None


def _x_ecc(sec: ET.Element | None, word: str) -> int | None:
    if sec is None:
        return None
    bit = sec.find("double_bit" if word == "uncorrectable" else "single_bit")
    if bit is not None:
        return _int(_x(bit, "total"))
    total, seen = 0, False
    for child in sec:
        tag = child.tag.lower()
        want = ("_uncorrectable" in tag or tag.endswith("_unc")) if word == "uncorrectable" else \
            ("_correctable" in tag and "uncorrectable" not in tag)
        if want and "threshold" not in tag:
            v = _int(child.text)
            if v is not None:
                total, seen = total + v, True
    return total if seen else None


def _x_gpu(gpu: ET.Element) -> dict:
    ecc = gpu.find("ecc_errors")
    vol = ecc.find("volatile") if ecc is not None else None
    agg = ecc.find("aggregate") if ecc is not None else None
    retired = gpu.find("retired_pages")
    remap = gpu.find("remapped_rows")
    health = {
        "ecc_volatile_uncorrected": _x_ecc(vol, "uncorrectable"), "ecc_volatile_corrected": _x_ecc(vol, "correctable"),
        "ecc_aggregate_uncorrected": _x_ecc(agg, "uncorrectable"), "ecc_aggregate_corrected": _x_ecc(agg, "correctable"),
        "retired_sbe": _int(_x(retired, "multiple_single_bit_retirement/retired_count")),
        "retired_dbe": _int(_x(retired, "double_bit_retirement/retired_count")),
        "retired_pending": yes_no(_x(retired, "pending_blacklist") or _x(retired, "pending_retirement")),
        "remapped_correctable": _int(_x(remap, "remapped_row_corr")),
        "remapped_uncorrectable": _int(_x(remap, "remapped_row_unc")),
        "remap_pending": yes_no(_x(remap, "remapped_row_pending")),
        "remap_failure": yes_no(_x(remap, "remapped_row_failure")),
    }
    power = gpu.find("gpu_power_readings")
    if power is None:
        power = gpu.find("power_readings")
    draw = None
    if power is not None:
        draw = number(_x(power, "power_draw")) or number(_x(power, "instant_power_draw")) \
            or number(_x(power, "average_power_draw"))
    procs = []
    for p in gpu.findall("processes/process_info"):
        procs.append({"pid": _int(_x(p, "pid")), "type": _x(p, "type"), "name": _x(p, "process_name"),
                      "used_mib": mib(_x(p, "used_memory"))})
    return {"line": None, "bus_id": gpu.get("id") or _x(gpu, "pci/pci_bus_id"), "name": _x(gpu, "product_name"),
            "mem_used_mib": mib(_x(gpu, "fb_memory_usage/used")),
            "mem_total_mib": mib(_x(gpu, "fb_memory_usage/total")),
            "util_pct": number(_x(gpu, "utilization/gpu_util")),
            "temp_c": number(_x(gpu, "temperature/gpu_temp")), "power_w": draw, "processes": procs,
            "health": health}


def gpus_from_xml(root: ET.Element) -> tuple[dict, list[dict]]:
    """Header facts and per-GPU dicts of one `nvidia-smi -q -x` document (already parsed, hardened)."""
    header = {"timestamp": _x(root, "timestamp"), "driver_version": _x(root, "driver_version"),
              "cuda_version": _x(root, "cuda_version"), "attached_gpus": _int(_x(root, "attached_gpus"))}
    return header, [_x_gpu(g) for g in root.findall("gpu")]
