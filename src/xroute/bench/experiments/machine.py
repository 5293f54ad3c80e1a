"""The machine a run happened on: CPU model and clock, cores, load, Python and package versions.

The seeds quote figures from a 2 GHz (OpenAMQ) and a 2.3 GHz (RabbitMQ) machine, so the clock
is needed to put figures side by side; it is read from /proc/cpuinfo or lscpu and reported as
unknown when neither gives it (never guessed).
"""

from __future__ import annotations

import os
import platform
import re
import shutil
import subprocess
import sys
from importlib import metadata
from pathlib import Path
from typing import Any

PACKAGES = (
    "xroute",
    "numpy",
    "numba",
    "pyroaring",
    "pyarrow",
    "matplotlib",
    "rich",
    "click",
    "kombu",
    "paho-mqtt",
    "amqp",
)


def _cpuinfo() -> dict[str, str]:
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return {}
    found: dict[str, str] = {}
    for line in text.splitlines():
        name, sep, value = line.partition(":")
        if sep and name.strip() not in found:
            found[name.strip()] = value.strip()
    return found


def _lscpu() -> dict[str, str]:
    if not shutil.which("lscpu"):
        return {}
    try:
        text = subprocess.run(["lscpu"], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        return {}
    return {
        name.strip(): value.strip()
        for name, sep, value in (line.partition(":") for line in text.splitlines())
        if sep
    }


def cpu_clock_ghz() -> tuple[float | None, str]:
    """(clock in GHz, where it was read), or (None, why not) when no source gives it.

    The maximum clock (lscpu) is preferred, as the seeds quote nominal clocks; under a
    hypervisor /proc/cpuinfo gives the host's nominal clock.
    """
    lscpu = _lscpu()
    for field in ("CPU max MHz", "CPU MHz"):
        value = lscpu.get(field)
        if value:
            try:
                return round(float(value) / 1000, 3), f"lscpu '{field}'"
            except ValueError:
                pass
    mhz = _cpuinfo().get("cpu MHz")
    if mhz:
        try:
            return round(float(mhz) / 1000, 3), "/proc/cpuinfo 'cpu MHz'"
        except ValueError:
            pass
    model = cpu_model()
    quoted = re.search(r"@\s*([\d.]+)\s*GHz", model)
    if quoted:
        return float(quoted.group(1)), "the CPU model name"
    return None, "unknown: neither lscpu nor /proc/cpuinfo gives a clock"


def cpu_model() -> str:
    """The CPU model name, as the kernel reports it."""
    return (
        _cpuinfo().get("model name")
        or _lscpu().get("Model name")
        or platform.processor()
        or "unknown"
    )


def _memory_gb() -> float | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return round(int(line.split()[1]) / 2**20, 1)
    except (OSError, ValueError, IndexError):
        pass
    return None


def load_average() -> list[float] | None:
    """The 1, 5 and 15 minute load averages (other work on the machine disturbs timings)."""
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return None


def machine_note() -> str:
    """The machine as measured now, for a benchmark's title: its cores, CPU model and load
    average. Nothing else is said of it: what else runs there is not known."""
    load = load_average()
    shown = " / ".join(f"{x:g}" for x in load) if load else "unknown"
    return f"{os.cpu_count()} cores, {cpu_model()}, load average {shown}"


def versions() -> dict[str, str]:
    """Installed versions of the packages a run depends on or compares against."""
    found = {}
    for name in PACKAGES:
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            found[name] = "not installed"
    return found


def machine_info() -> dict[str, Any]:
    """Everything the report says about the machine, as plain JSON values."""
    ghz, source = cpu_clock_ghz()
    try:
        usable = len(os.sched_getaffinity(0))
    except AttributeError:
        usable = os.cpu_count()
    return {
        "cpu_model": cpu_model(),
        "cpu_ghz": ghz,
        "cpu_ghz_source": source,
        "cores": os.cpu_count(),
        "cores_usable": usable,
        "hypervisor": _lscpu().get("Hypervisor vendor"),
        "memory_gb": _memory_gb(),
        "os": platform.platform(),
        "python": f"{platform.python_implementation()} {platform.python_version()}",
        "python_executable": sys.executable,
        "packages": versions(),
        "load_average_start": load_average(),
    }
