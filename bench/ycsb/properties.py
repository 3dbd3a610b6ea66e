"""YCSB workload property files: Java properties text in, a typed Workload out, with the defaults
YCSB's CoreWorkload (and its Client, for the counts) gives a property left unset."""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Literal

Distribution = Literal["uniform", "zipfian", "latest"]
DISTRIBUTIONS: tuple[str, ...] = ("uniform", "zipfian", "latest")
SCAN_LENGTH_DISTRIBUTIONS: tuple[str, ...] = ("uniform", "zipfian")


class PropertyError(ValueError):
    """A property file or override that cannot describe a workload; the message names it."""


def parse_properties(text: str, source: str = "<properties>") -> dict[str, str]:
    """Java ``Properties.load`` for what workload files use: ``#``/``!`` comments, ``key=value``,
    ``key: value`` or ``key value``, surrounding blanks dropped, a trailing backslash continuing
    the line. A later key replaces an earlier one, as in Java."""
    properties: dict[str, str] = {}
    logical = ""
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip() if not logical else raw.lstrip()
        if not logical and (not line or line[0] in "#!"):
            continue
        if _continues(line):
            logical += line[:-1]
            continue
        logical += line
        key, value = _split(logical)
        if not key:
            raise PropertyError(f"{source}:{number}: a line without a key: {raw.strip()!r}")
        properties[key] = value
        logical = ""
    if logical:
        key, value = _split(logical)
        properties[key] = value
    return properties


def _continues(line: str) -> bool:
    """An odd number of trailing backslashes continues the line (an even number is escaped)."""
    trailing = len(line) - len(line.rstrip("\\"))
    return trailing % 2 == 1


def _split(line: str) -> tuple[str, str]:
    for index, char in enumerate(line):
        if char in "=:" or char.isspace():
            key, rest = line[:index], line[index:].lstrip()
            if rest[:1] in ("=", ":"):
                rest = rest[1:]
            return key, rest.strip()
    return line, ""


def load_properties(path: Path) -> dict[str, str]:
    try:
        text = path.read_text()
    except OSError as exc:
        raise PropertyError(f"cannot read {path}: {exc.strerror}") from None
    return parse_properties(text, str(path))


@dataclass(frozen=True)
class Workload:
    """The core workload's properties this client honours (CoreWorkload's defaults)."""

    name: str = "workload"
    table: str = "usertable"
    recordcount: int = 0
    operationcount: int = 0
    threadcount: int = 1
    fieldcount: int = 10
    fieldlength: int = 100
    fieldnameprefix: str = "field"
    readallfields: bool = True
    writeallfields: bool = False
    readproportion: float = 0.95
    updateproportion: float = 0.05
    insertproportion: float = 0.0
    scanproportion: float = 0.0
    readmodifywriteproportion: float = 0.0
    requestdistribution: Distribution = "uniform"
    minscanlength: int = 1
    maxscanlength: int = 1000
    scanlengthdistribution: str = "uniform"
    insertorder: str = "hashed"
    zeropadding: int = 1
    percentiles: tuple[float, ...] = (95.0, 99.0)
    # Every property as given, the ones above included (YCSB hands them all to the binding).
    raw: dict[str, str] = field(default_factory=dict, compare=False, repr=False)

    @property
    def field_names(self) -> list[str]:
        return [f"{self.fieldnameprefix}{i}" for i in range(self.fieldcount)]

    @property
    def proportions(self) -> dict[str, float]:
        """YCSB's operation names, each with its share (those above 0, in CoreWorkload's order)."""
        shares = {
            "READ": self.readproportion,
            "UPDATE": self.updateproportion,
            "INSERT": self.insertproportion,
            "SCAN": self.scanproportion,
            "READMODIFYWRITE": self.readmodifywriteproportion,
        }
        return {name: share for name, share in shares.items() if share > 0}


# The YCSB property name of each Workload field where the two differ.
PROPERTY_NAMES = {"percentiles": "hdrhistogram.percentiles"}
UNSUPPORTED = {
    "fieldlengthdistribution": "constant",
    "dataintegrity": "false",
}


def workload_from(properties: dict[str, str], name: str = "workload") -> Workload:
    """A Workload from property values (a file's, then overrides); a bad value is a
    PropertyError naming the property and the value."""
    values: dict[str, object] = {"name": name, "raw": dict(properties)}
    for spec in fields(Workload):
        if spec.name in ("name", "raw"):
            continue
        key = PROPERTY_NAMES.get(spec.name, spec.name)
        if key in properties:
            values[spec.name] = _typed(spec.name, key, properties[key])
    for key, only in UNSUPPORTED.items():
        if properties.get(key, only) != only:
            raise PropertyError(f"{key}={properties[key]}: this client supports only {only}")
    workload = Workload(**values)  # type: ignore[arg-type]
    _check(workload)
    return workload


def _typed(attribute: str, key: str, text: str) -> object:
    default = getattr(Workload(), attribute)
    if isinstance(default, bool):
        if text.lower() not in ("true", "false"):
            raise PropertyError(f"{key}={text!r} is not true or false")
        return text.lower() == "true"
    if isinstance(default, int):
        try:
            return int(text)
        except ValueError:
            raise PropertyError(f"{key}={text!r} is not a whole number") from None
    if isinstance(default, float):
        try:
            return float(text)
        except ValueError:
            raise PropertyError(f"{key}={text!r} is not a number") from None
    if isinstance(default, tuple):
        try:
            return tuple(float(part) for part in text.split(","))
        except ValueError:
            raise PropertyError(f"{key}={text!r} is not a list of numbers like 95,99") from None
    return text


def _check(workload: Workload) -> None:
    problems = []
    if workload.recordcount < 1:
        problems.append("recordcount must be set to at least 1")
    if workload.operationcount < 0:
        problems.append("operationcount must not be negative")
    if workload.threadcount < 1:
        problems.append("threadcount must be at least 1")
    if workload.fieldcount < 1 or workload.fieldlength < 1:
        problems.append("fieldcount and fieldlength must be at least 1")
    shares = {
        "readproportion": workload.readproportion,
        "updateproportion": workload.updateproportion,
        "insertproportion": workload.insertproportion,
        "scanproportion": workload.scanproportion,
        "readmodifywriteproportion": workload.readmodifywriteproportion,
    }
    for key, share in shares.items():
        if not 0.0 <= share <= 1.0:
            problems.append(f"{key}={share} is not between 0 and 1")
    if workload.operationcount and not any(share > 0 for share in shares.values()):
        problems.append("every operation proportion is 0")
    if workload.requestdistribution not in DISTRIBUTIONS:
        problems.append(
            f"requestdistribution={workload.requestdistribution!r}: one of "
            f"{', '.join(DISTRIBUTIONS)}"
        )
    if workload.scanlengthdistribution not in SCAN_LENGTH_DISTRIBUTIONS:
        problems.append(
            f"scanlengthdistribution={workload.scanlengthdistribution!r}: uniform or zipfian"
        )
    if not 1 <= workload.minscanlength <= workload.maxscanlength:
        problems.append("scan lengths must satisfy 1 <= minscanlength <= maxscanlength")
    if workload.insertorder not in ("hashed", "ordered"):
        problems.append(f"insertorder={workload.insertorder!r}: hashed or ordered")
    if any(not 0 < p < 100 for p in workload.percentiles):
        problems.append("hdrhistogram.percentiles must lie between 0 and 100")
    if problems:
        raise PropertyError(f"{workload.name}: " + "; ".join(problems))
