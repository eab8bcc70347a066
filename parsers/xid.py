"""NVIDIA Xid codes as data: meaning and whether the fault lies with the hardware, the driver or the application.

From NVIDIA's Xid catalog (docs.nvidia.com/deploy/xid-errors); only codes that matter for a training job post-mortem.
origin: "hardware" (GPU/memory/link/firmware fault: drain the node), "application" (a bug in the program: illegal
address, engine exception; 45 only cleans up after another error), "driver" (driver/firmware or either side).
"""
from __future__ import annotations

XID_CODES: dict[int, tuple[str, str]] = {
    8: ("GPU stopped processing (timeout)", "driver"),
    13: ("Graphics engine exception (often an out-of-range access in a kernel)", "application"),
    31: ("GPU memory page fault (MMU fault; usually an illegal address in the application)", "application"),
    32: ("Invalid or corrupted push buffer stream", "driver"),
    38: ("Driver firmware error", "driver"),
    43: ("GPU stopped processing (channel reset after an application fault)", "application"),
    44: ("Graphics engine fault during context switch", "driver"),
    45: ("Preemptive cleanup after a previous error (follows another Xid)", "application"),
    48: ("Double-bit ECC error (DBE)", "hardware"),
    56: ("Display engine error", "driver"),
    57: ("Error programming video memory interface", "hardware"),
    58: ("Unstable video memory interface detected", "hardware"),
    61: ("Internal micro-controller breakpoint/warning", "hardware"),
    62: ("Internal micro-controller halt", "hardware"),
    63: ("ECC page retirement or row-remapping recorded (reset the GPU to apply)", "hardware"),
    64: ("ECC page retirement or row-remapping recording failure", "hardware"),
    65: ("Video processor exception", "hardware"),
    68: ("Video decoder (NVDEC) exception", "driver"),
    69: ("Graphics engine class error", "driver"),
    74: ("NVLink error", "hardware"),
    79: ("GPU has fallen off the bus", "hardware"),
    92: ("High single-bit ECC error rate", "hardware"),
    94: ("Contained ECC error (the affected application must restart)", "hardware"),
    95: ("Uncontained ECC error (all applications on the GPU affected; reset needed)", "hardware"),
    109: ("Context switch timeout", "driver"),
    119: ("GSP RPC timeout", "hardware"),
    120: ("GSP error", "hardware"),
    121: ("C2C link corrected error", "hardware"),
    122: ("SPI PMU RPC read failure", "hardware"),
    123: ("SPI PMU RPC write failure", "hardware"),
    124: ("SPI PMU RPC erase failure", "hardware"),
    136: ("Uncorrectable ECC error in a GPU unit", "hardware"),
    140: ("Unrecovered ECC error", "hardware"),
    143: ("GPU initialization failure", "hardware"),
    144: ("NVLink: SAW MVB/MSE error", "hardware"),
    145: ("NVLink: RLW error", "hardware"),
    146: ("NVLink: TLW error", "hardware"),
    147: ("NVLink: TREX error", "hardware"),
    148: ("NVLink: NVLPW control error", "hardware"),
    149: ("NVLink: NETIR error", "hardware"),
    150: ("NVLink: MSE watchdog timeout", "hardware"),
    154: ("GPU recovery action changed (reset or reboot required)", "hardware"),
}


def xid_info(code: int) -> tuple[str | None, str]:
    """(meaning, origin) of an Xid code; (None, "unknown") for codes not in the table."""
    return XID_CODES.get(code, (None, "unknown"))
