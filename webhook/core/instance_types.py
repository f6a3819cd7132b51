"""Cloud instance types that carry one GPU product, as ``node.kubernetes.io/instance-type`` holds them.

Every cloud writes its machine name into the well-known instance-type label, and tutorials pin it:
EKS ``p5.48xlarge``, SageMaker HyperPod ``ml.g5.8xlarge``, AKS ``Standard_ND96isr_H100_v5``, OKE
``BM.GPU.H100.8``, GKE ``a3-highgpu-8g``. A name listed here is read as the product pin it is; a
name that is not (a CPU type, a new GPU type, a fractional vGPU size) is *unknown*, never wrong:
:mod:`webhook.core.pins` then resolves it through the inventory or warns that it cannot tell.

The tables are data, ``data/instance-types.yaml`` (with the source of every entry and what is left
out and why), so a new machine name is a data change. The file is read once, at import, and checked
as :mod:`webhook.core.hardware` checks ``gpus.yaml``: an unknown or missing field, a product id the
bundled catalog lacks, an upper-case Azure size or a GCE family of the wrong shape is a
``ValueError`` naming the field, raised on import, so a broken file can never ship as a table that
silently reads nothing. :func:`load` does the checking on any parsed document (the tests hand it
broken ones).

Pure apart from reading the bundled file: strings in, catalog product ids out.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

import yaml

from webhook.core import bundled
from webhook.core.hardware import default_catalog

INSTANCE_TYPE = "node.kubernetes.io/instance-type"
DATA_FILE = "instance-types.yaml"

_FIELDS = ("sagemaker_prefix", "ec2_families", "azure_sizes", "oci_shapes", "gcp_machine_families",
           "nebius_platforms")
_GCP_FIELDS = ("product", "accelerator")
_EC2_FAMILY = re.compile(r"[a-z][a-z0-9]*(-[a-z0-9]+)*")
"""An EC2 family: what comes before the first dot of an instance type (``p5``, ``p6-b200``)."""
_GCP_FAMILY = re.compile(r"[a-z][a-z0-9]*-[a-z]+")
"""A GCE machine family: the series and the kind (``a3-highgpu``), the part :data:`_GCP_MACHINE` splits off."""
_GCP_MACHINE = re.compile(r"([a-z][a-z0-9]*-[a-z]+)-([0-9]+g?)")
_NEBIUS_PLATFORM = re.compile(r"gpu-[a-z0-9]+(?:-[a-z0-9]+)*")
_NEBIUS_TYPE = re.compile(r"(gpu-[a-z0-9-]{1,40}?)-([0-9]{1,2}gpu-[0-9]{1,4}vcpu-[0-9]{1,6}gb)")
"""A Nebius instance type: the platform, then the preset (``gpu-h100-sxm-8gpu-128vcpu-1600gb``)."""


@dataclass(frozen=True)
class InstanceTables:
    """The instance-type tables of one checked document (read-only mappings, in file order)."""

    sagemaker_prefix: str
    ec2_families: Mapping[str, str]
    azure_sizes: Mapping[str, str]
    oci_shapes: Mapping[str, str]
    gcp_machine_families: Mapping[str, str]
    gcp_accelerators: Mapping[str, str]
    nebius_platforms: Mapping[str, str]


def load(data: Any, products: Collection[str]) -> InstanceTables:
    """Check a parsed ``instance-types.yaml`` against the product ids ``products`` and build its tables.

    Every problem is a ``ValueError`` that names the field (``azure_sizes.Standard_X: must be
    lower-case``), because a table that quietly read nothing would turn every pin on it into "cannot
    tell" with no hint why.
    """
    if not isinstance(data, Mapping):
        raise ValueError(f"{DATA_FILE}: must be a mapping with {', '.join(_FIELDS)}")
    _exact_fields("", data, _FIELDS)
    prefix = data["sagemaker_prefix"]
    if not isinstance(prefix, str) or not prefix.endswith(".") or len(prefix) < 2:
        raise ValueError(f"sagemaker_prefix: must be a name ending in '.', got {prefix!r}")
    ec2 = _table("ec2_families", data["ec2_families"], products)
    for family in ec2:
        if not _EC2_FAMILY.fullmatch(family):
            raise ValueError(f"ec2_families.{family}: not an EC2 family (lower-case, no dot: p5, p6-b200)")
    azure = _table("azure_sizes", data["azure_sizes"], products)
    for size in azure:
        if size != size.lower():
            raise ValueError(f"azure_sizes.{size}: must be lower-case (Azure compares sizes case-insensitively)")
    oci = _table("oci_shapes", data["oci_shapes"], products)
    gcp, accelerators = _gcp(data["gcp_machine_families"], products)
    nebius = _table("nebius_platforms", data["nebius_platforms"], products)
    for platform in nebius:
        if not _NEBIUS_PLATFORM.fullmatch(platform):
            raise ValueError(f"nebius_platforms.{platform}: not a Nebius GPU platform (gpu-<card>-...: gpu-h100-sxm)")
    return InstanceTables(prefix, ec2, azure, oci, gcp, accelerators, nebius)


def _table(path: str, raw: Any, products: Collection[str]) -> Mapping[str, str]:
    if not isinstance(raw, Mapping) or not raw:
        raise ValueError(f"{path}: must be a non-empty mapping of name -> catalog product id")
    out: dict[str, str] = {}
    for name, pid in raw.items():
        if not isinstance(name, str) or not name or any(ch.isspace() for ch in name):
            raise ValueError(f"{path}.{name}: names must be non-empty strings without spaces")
        out[name] = _product(f"{path}.{name}", pid, products)
    return MappingProxyType(out)


def _product(path: str, pid: Any, products: Collection[str]) -> str:
    if not isinstance(pid, str) or pid not in products:
        raise ValueError(f"{path}: unknown GPU product {pid!r} (not in gpus.yaml)")
    return pid


def _exact_fields(prefix: str, raw: Mapping[str, Any], known: Sequence[str]) -> None:
    """Refuse a member of ``raw`` that is not in ``known``, or one of ``known`` that is missing,
    naming it after ``prefix``."""
    for key in raw:
        if key not in known:
            raise ValueError(f"{prefix}{key}: unknown field (known: {', '.join(known)})")
    for key in known:
        if key not in raw:
            raise ValueError(f"{prefix}{key}: required field is missing")


def _gcp(raw: Any, products: Collection[str]) -> tuple[Mapping[str, str], Mapping[str, str]]:
    path = "gcp_machine_families"
    if not isinstance(raw, Mapping) or not raw:
        raise ValueError(f"{path}: must be a non-empty mapping of family -> {{product, accelerator}}")
    families: dict[str, str] = {}
    accelerators: dict[str, str] = {}
    for family, entry in raw.items():
        where = f"{path}.{family}"
        if not isinstance(family, str) or not _GCP_FAMILY.fullmatch(family):
            raise ValueError(f"{where}: not a GCE machine family (<series>-<kind>: a3-highgpu)")
        if not isinstance(entry, Mapping):
            raise ValueError(f"{where}: must be a mapping with {', '.join(_GCP_FIELDS)}")
        _exact_fields(f"{where}.", entry, _GCP_FIELDS)
        accelerator = entry["accelerator"]
        if not isinstance(accelerator, str) or not accelerator:
            raise ValueError(f"{where}.accelerator: must be a GKE accelerator type, got {accelerator!r}")
        families[family] = _product(f"{where}.product", entry["product"], products)
        accelerators[family] = accelerator
    return MappingProxyType(families), MappingProxyType(accelerators)


def _bundled() -> InstanceTables:
    text = bundled.text(DATA_FILE)
    # the C parser when PyYAML has it, as for gpus.yaml: same document, less start-up time
    data = yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))  # noqa: S506
    return load(data, default_catalog().products)


_TABLES = _bundled()

INSTANCE_FAMILIES: Mapping[str, str] = _TABLES.ec2_families
"""EC2 family (the part before the first dot) -> product; the EC2 families whose GPU is one product
(Karpenter names p4d and p4de both ``a100``: the memory, 40960 vs 81920 MiB, tells them apart). Also
what a Karpenter NodePool may launch (:mod:`webhook.core.nodepools`) and what a pin refused on EC2
is offered instead, in this order."""

SAGEMAKER_PREFIX: str = _TABLES.sagemaker_prefix
"""SageMaker (HyperPod, endpoints, training jobs) names an EC2 type with this prefix: ``ml.g5.8xlarge``."""

AZURE_SIZES: Mapping[str, str] = _TABLES.azure_sizes
"""Azure VM size, lower-cased -> product. Azure sizes do not split into a family and a size the way
EC2 names do (the A100 40GB size ``Standard_ND96asr_v4`` does not even name its GPU), so they are
listed one by one."""

OCI_SHAPES: Mapping[str, str] = _TABLES.oci_shapes
"""Oracle Cloud shape -> product (OKE writes the shape into ``node.kubernetes.io/instance-type``)."""

GCP_MACHINE_FAMILIES: Mapping[str, str] = _TABLES.gcp_machine_families
"""GCE accelerator-optimized machine family (the machine type without its ``-<N>g`` / ``-<N>`` size) -> product."""

GCP_ACCELERATORS: Mapping[str, str] = _TABLES.gcp_accelerators
"""The ``cloud.google.com/gke-accelerator`` value of each family: the tests check that the catalog
reads it as the product above, so the two files cannot drift apart."""


NEBIUS_PLATFORMS: Mapping[str, str] = _TABLES.nebius_platforms
"""Nebius GPU platform -> product; a Nebius node's instance type is ``<platform>-<preset>``."""


def instance_product(value: str) -> str | None:
    """Catalog id of the one GPU product an instance type carries, or ``None`` when it is not known
    here (which says nothing about the type: it may be a CPU type or a GPU type this table lacks)."""
    if not isinstance(value, str) or not value:
        return None
    if value in OCI_SHAPES:
        return OCI_SHAPES[value]
    lowered = value.lower()
    azure = lowered.removesuffix("_promo")
    if azure in AZURE_SIZES:
        return AZURE_SIZES[azure]
    gcp = _GCP_MACHINE.fullmatch(value)
    if gcp and gcp.group(1) in GCP_MACHINE_FAMILIES:
        return GCP_MACHINE_FAMILIES[gcp.group(1)]
    nebius = _NEBIUS_TYPE.fullmatch(value) if value.startswith("gpu-") else None
    if nebius and nebius.group(1) in NEBIUS_PLATFORMS:
        return NEBIUS_PLATFORMS[nebius.group(1)]
    ec2 = value.removeprefix(SAGEMAKER_PREFIX)
    if ec2 != value and "." not in ec2:
        return None  # "ml.g5" names no instance
    return INSTANCE_FAMILIES.get(ec2.split(".", 1)[0])
