"""The instance-type table as a data file (issue 28, "label schemes"): ``data/instance-types.yaml`` is
read at import, checked like ``gpus.yaml`` (a broken file is refused with an error naming the field),
and gives the same public tables and the same readings as the Python dicts it replaced."""

from __future__ import annotations

import copy
import re
from typing import Any

import pytest
import yaml

from webhook.core import bundled, instance_types
from webhook.core.hardware import default_catalog
from webhook.core.instance_types import InstanceTables, load
from tests.edits import delete_at, set_at

PRODUCTS = default_catalog().products


def _raw() -> dict[str, Any]:
    """A fresh, mutable copy of the bundled instance-type data."""
    return yaml.safe_load(bundled.text("instance-types.yaml"))


_set, _delete = set_at, delete_at


# --------------------------------------------------------------------------- the bundled file


def test_the_public_tables_are_the_bundled_file() -> None:
    tables = load(_raw(), PRODUCTS)
    assert dict(instance_types.INSTANCE_FAMILIES) == dict(tables.ec2_families)
    assert list(instance_types.INSTANCE_FAMILIES) == list(tables.ec2_families)  # order: what a refusal offers
    assert instance_types.SAGEMAKER_PREFIX == tables.sagemaker_prefix == "ml."
    assert dict(instance_types.AZURE_SIZES) == dict(tables.azure_sizes)
    assert dict(instance_types.OCI_SHAPES) == dict(tables.oci_shapes)
    assert dict(instance_types.GCP_MACHINE_FAMILIES) == dict(tables.gcp_machine_families)
    assert dict(instance_types.GCP_ACCELERATORS) == dict(tables.gcp_accelerators)
    assert dict(instance_types.NEBIUS_PLATFORMS) == dict(tables.nebius_platforms)


@pytest.mark.parametrize("table", [
    pytest.param(instance_types.INSTANCE_FAMILIES, id="ec2"), pytest.param(instance_types.AZURE_SIZES, id="azure"),
    pytest.param(instance_types.OCI_SHAPES, id="oci"), pytest.param(instance_types.GCP_MACHINE_FAMILIES, id="gcp"),
    pytest.param(instance_types.GCP_ACCELERATORS, id="gcp-accelerators"),
    pytest.param(instance_types.NEBIUS_PLATFORMS, id="nebius"),
])
def test_the_public_tables_are_read_only(table: Any) -> None:
    with pytest.raises(TypeError):
        table["x"] = "L4"


def test_every_entry_names_its_source_or_says_it_has_none() -> None:
    """Every table's source is in the file's header (``[TAG] repository path @ commit``); in the tables
    fed by several sources (Azure, OCI, GCE) an entry names its tag, or continues the group of the
    entry above it, or is marked unconfirmed with ``(?)``."""
    text = bundled.text("instance-types.yaml")
    header = set(re.findall(r"^#\s+\[([A-Z]+)\]", text, flags=re.MULTILINE))
    assert {"K", "HP", "CA", "AZ", "KAITO", "ASPIRE", "OCI", "CT", "XPK", "NEB"} <= header
    section, source = None, None
    for line in text.splitlines():
        head = re.match(r"^([a-z_]+):", line)
        if head:
            section, source = head.group(1), None
            continue
        if section in ("azure_sizes", "oci_shapes", "gcp_machine_families", "nebius_platforms") \
                and re.match(r"^  \S", line):
            cited = re.findall(r"\[([A-Z]+)\]", line)
            assert set(cited) <= header, line
            source = cited or ("(?)" if "(?)" in line else source)
            assert source, f"{section}: {line.strip()} names no source"


# --------------------------------------------------------------------------- validation


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        pytest.param(_set(("gce_families",), {}), r"^gce_families: unknown field \(known: sagemaker_prefix, ",
                     id="unknown-top-level-field"),
        pytest.param(_delete(("azure_sizes",)), r"^azure_sizes: required field is missing", id="missing-table"),
        pytest.param(_set(("ec2_families", "p5"), "H100"),
                     r"^ec2_families\.p5: unknown GPU product 'H100' \(not in gpus\.yaml\)", id="unknown-product"),
        pytest.param(_set(("oci_shapes", "BM.GPU.L40S.4"), 40),
                     r"^oci_shapes\.BM\.GPU\.L40S\.4: unknown GPU product 40", id="product-not-a-string"),
        pytest.param(_set(("ec2_families", "p5.48xlarge"), "H100-SXM5-80GB"),
                     r"^ec2_families\.p5\.48xlarge: not an EC2 family", id="ec2-size-not-family"),
        pytest.param(_set(("azure_sizes", "Standard_NC4as_T4_v3"), "T4"),
                     r"^azure_sizes\.Standard_NC4as_T4_v3: must be lower-case", id="azure-upper-case"),
        pytest.param(_set(("oci_shapes", "BM GPU"), "A10"), r"^oci_shapes\.BM GPU: names must be non-empty strings",
                     id="name-with-space"),
        pytest.param(_set(("oci_shapes",), {}), r"^oci_shapes: must be a non-empty mapping", id="empty-table"),
        pytest.param(_set(("nebius_platforms", "h100-sxm"), "H100-SXM5-80GB"),
                     r"^nebius_platforms\.h100-sxm: not a Nebius GPU platform", id="nebius-platform-shape"),
        pytest.param(_set(("azure_sizes",), ["standard_nc4as_t4_v3"]), r"^azure_sizes: must be a non-empty mapping",
                     id="table-not-mapping"),
        pytest.param(_set(("sagemaker_prefix",), "ml"), r"^sagemaker_prefix: must be a name ending in '\.'",
                     id="prefix-without-dot"),
        pytest.param(_delete(("gcp_machine_families", "a2-highgpu", "accelerator")),
                     r"^gcp_machine_families\.a2-highgpu\.accelerator: required field is missing",
                     id="gcp-missing-accelerator"),
        pytest.param(_set(("gcp_machine_families", "a2-highgpu", "gpus"), 8),
                     r"^gcp_machine_families\.a2-highgpu\.gpus: unknown field \(known: product, accelerator\)",
                     id="gcp-unknown-field"),
        pytest.param(_set(("gcp_machine_families", "a3-highgpu", "product"), "H100"),
                     r"^gcp_machine_families\.a3-highgpu\.product: unknown GPU product 'H100'",
                     id="gcp-unknown-product"),
        pytest.param(_set(("gcp_machine_families", "a3"), {"product": "H100-SXM5-80GB", "accelerator": "x"}),
                     r"^gcp_machine_families\.a3: not a GCE machine family", id="gcp-family-shape"),
        pytest.param(_set(("gcp_machine_families", "g2-standard"), "L4"),
                     r"^gcp_machine_families\.g2-standard: must be a mapping with product, accelerator",
                     id="gcp-entry-not-mapping"),
        pytest.param(_set(("gcp_machine_families", "g2-standard", "accelerator"), ""),
                     r"^gcp_machine_families\.g2-standard\.accelerator: must be a GKE accelerator type",
                     id="gcp-empty-accelerator"),
    ],
)
def test_a_broken_file_is_refused_naming_the_field(mutate: Any, message: str) -> None:
    data = _raw()
    mutate(data)
    with pytest.raises(ValueError, match=message):
        load(data, PRODUCTS)


@pytest.mark.parametrize("data", [pytest.param([], id="list"), pytest.param("ec2", id="string"),
                                  pytest.param(None, id="empty-file")])
def test_a_file_that_is_not_a_mapping_is_refused(data: Any) -> None:
    with pytest.raises(ValueError, match=r"^instance-types\.yaml: must be a mapping"):
        load(data, PRODUCTS)


def test_product_ids_are_checked_against_the_catalog_given() -> None:
    """The ids are checked against the catalog passed in: a table naming a product the catalog lacks
    is refused, the same table against a catalog that has it is not."""
    data = _raw()
    with pytest.raises(ValueError, match=r"^ec2_families\.p4d: unknown GPU product 'A100-SXM4-40GB'"):
        load(data, set(PRODUCTS) - {"A100-SXM4-40GB"})
    assert load(data, PRODUCTS).ec2_families["p4d"] == "A100-SXM4-40GB"


def test_load_keeps_file_order_and_does_not_mutate_its_input() -> None:
    data = _raw()
    before = copy.deepcopy(data)
    tables = load(data, PRODUCTS)
    assert data == before
    assert isinstance(tables, InstanceTables)
    assert list(tables.ec2_families) == list(data["ec2_families"])
    assert list(tables.gcp_accelerators) == list(data["gcp_machine_families"])


def test_the_bundled_file_is_checked_when_it_is_read(monkeypatch: pytest.MonkeyPatch) -> None:
    """What runs at import: a bundled file with an unknown product id never becomes a table."""
    broken = bundled.text("instance-types.yaml").replace("p5: H100-SXM5-80GB", "p5: H100-SXM5")
    assert broken != bundled.text("instance-types.yaml")
    monkeypatch.setattr(bundled, "text", lambda name: broken)
    with pytest.raises(ValueError, match=r"^ec2_families\.p5: unknown GPU product 'H100-SXM5'"):
        instance_types._bundled()
