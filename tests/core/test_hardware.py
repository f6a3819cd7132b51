"""The GPU catalog: label values <-> products, pinned options, and the validation of catalog data."""

from __future__ import annotations

import copy
from typing import Any

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from webhook.core import hardware
from webhook.core.hardware import Catalog, default_catalog, load_catalog
from tests.edits import delete_at, set_at

CAT = default_catalog()


def _raw() -> dict[str, Any]:
    """A fresh, mutable copy of the bundled catalog data."""
    from importlib import resources

    return yaml.safe_load(resources.files("webhook.core").joinpath("data/gpus.yaml").read_text(encoding="utf-8"))


# --------------------------------------------------------------------------- the bundled data


def test_every_product_of_the_spec_table_is_present_in_catalog_order() -> None:
    assert list(CAT.products) == [
        "A100-SXM4-40GB", "A100-SXM4-80GB", "A100-PCIE-80GB", "A100-PCIE-40GB",
        "H100-SXM5-80GB", "H100-PCIE-80GB", "H100-NVL", "H200", "H200-NVL", "H20", "GH200",
        "B200", "GB200", "L40S", "L40", "RTX-6000-Ada", "L4", "RTX-4090", "A10", "A10G", "T4",
        "V100-SXM2-16GB", "V100-SXM2-32GB", "V100-PCIE-32GB", "MI300X",
    ]


def test_schemes_map_to_label_keys() -> None:
    assert dict(CAT.schemes) == {
        "gfd": "nvidia.com/gpu.product",
        "gke": "cloud.google.com/gke-accelerator",
        "karpenter": "karpenter.k8s.aws/instance-gpu-name",
        "amd": "amd.com/gpu.product-name",
        "coreweave": "gpu.nvidia.com/class",
        "vke": "machine.cluster.vke.volcengine.com/gpu-name",
        "ack": "aliyun.accelerator/nvidia_name",
    }
    assert CAT.label_key("gke") == "cloud.google.com/gke-accelerator"


def test_default_tiers() -> None:
    assert dict(CAT.tiers) == {
        "hbm-nvlink": ("A100-SXM4-40GB", "A100-SXM4-80GB", "H100-SXM5-80GB", "H200", "H20", "GH200",
                       "B200", "GB200"),
        "cost": ("L40S", "L40", "RTX-6000-Ada", "L4", "RTX-4090", "A10", "A10G"),
    }


def test_default_tiers_match_the_shipped_policy() -> None:
    # The embedded policy names tiers by product id; a renamed id here would break it.
    from importlib import resources

    policy = yaml.safe_load(resources.files("webhook.core").joinpath("data/policy.yaml").read_text(encoding="utf-8"))
    for tier in policy["tiers"]:
        assert set(tier["products"]) == set(CAT.tiers[tier["name"]]), tier["name"]


@pytest.mark.parametrize(
    ("pid", "memory_gib", "bandwidth", "interconnect", "cc", "family"),
    [
        pytest.param("A100-SXM4-80GB", 80.0, 2039, "nvlink", "8.0", "ampere", id="a100-80"),
        pytest.param("A100-SXM4-40GB", 40.0, 1555, "nvlink", "8.0", "ampere", id="a100-40"),
        pytest.param("H100-SXM5-80GB", 81559 / 1024, 3350, "nvlink", "9.0", "hopper", id="h100"),
        pytest.param("H100-NVL", 95830 / 1024, 3900, "nvlink-bridge", "9.0", "hopper", id="h100-nvl"),
        pytest.param("H200", 143771 / 1024, 4800, "nvlink", "9.0", "hopper", id="h200"),
        pytest.param("L40S", 46068 / 1024, 864, "pcie", "8.9", "ada-lovelace", id="l40s"),
        pytest.param("L4", 23034 / 1024, 300, "pcie", "8.9", "ada-lovelace", id="l4"),
        pytest.param("RTX-4090", 24564 / 1024, 1008, "pcie", "8.9", "ada-lovelace", id="rtx4090"),
        pytest.param("A10G", 23028 / 1024, 600, "pcie", "8.6", "ampere", id="a10g"),
        pytest.param("T4", 15109 / 1024, 320, "pcie", "7.5", "turing", id="t4"),
        pytest.param("B200", 179.0, 8000, "nvlink", "10.0", "blackwell", id="b200"),
        pytest.param("MI300X", 191.984, 5300, "infinity-fabric", "gfx942", "cdna3", id="mi300x"),
    ],
)
def test_product_specs(pid: str, memory_gib: float, bandwidth: float, interconnect: str, cc: str,
                       family: str) -> None:
    p = CAT.product(pid)
    assert p.memory_gib == pytest.approx(memory_gib, abs=0.001)
    assert p.bandwidth_gbs == bandwidth
    assert p.interconnect == interconnect
    assert p.compute_capability == cc
    assert p.family == family


def test_allreduce_constants_are_the_calibrated_ones() -> None:
    # Calibration documented in gpus.yaml: Llama-3-70B TP4 ~25 ms on A100 SXM4, ~105 ms on L40S.
    assert CAT.allreduce_us["A100-SXM4-80GB"] == 45
    assert CAT.allreduce_us["L40S"] == 400
    nvlink = [CAT.allreduce_us[p] for p, g in CAT.products.items() if g.interconnect == "nvlink"]
    pcie = [CAT.allreduce_us[p] for p, g in CAT.products.items() if g.interconnect == "pcie"]
    assert max(nvlink) < min(pcie)


def test_product_unknown_raises_keyerror_naming_it() -> None:
    with pytest.raises(KeyError, match="unknown GPU product 'A30'.*A100-SXM4-80GB"):
        CAT.product("A30")


def test_default_catalog_is_loaded_once() -> None:
    assert default_catalog() is CAT
    assert load_catalog() is CAT


def test_catalog_is_hashable_by_identity() -> None:
    assert hash(CAT) == hash(CAT)
    assert load_catalog(_raw()) != CAT  # a registry: compare fields, not catalogs


# --------------------------------------------------------------------------- parse_label (gfd)

GPUS_MD_GFD_VALUES = [
    ("NVIDIA-A100-SXM4-40GB", "A100-SXM4-40GB"),
    ("NVIDIA-A100-SXM4-80GB", "A100-SXM4-80GB"),
    ("NVIDIA-A100-80GB-PCIe", "A100-PCIE-80GB"),
    ("NVIDIA-A100-PCIE-40GB", "A100-PCIE-40GB"),
    ("A100-SXM4-40GB", "A100-SXM4-40GB"),
    ("NVIDIA-H100-80GB-HBM3", "H100-SXM5-80GB"),
    ("NVIDIA-H100-PCIe", "H100-PCIE-80GB"),
    ("NVIDIA-H100-NVL", "H100-NVL"),
    ("NVIDIA-H200", "H200"),
    ("NVIDIA-H200-NVL", "H200-NVL"),
    ("NVIDIA-H20", "H20"),
    ("NVIDIA-L40S", "L40S"),
    ("NVIDIA-L40", "L40"),
    ("NVIDIA-L4", "L4"),
    ("NVIDIA-RTX-6000-Ada-Generation", "RTX-6000-Ada"),
    ("NVIDIA-GeForce-RTX-4090", "RTX-4090"),
    ("NVIDIA-A10", "A10"),
    ("NVIDIA-A10G", "A10G"),
    ("Tesla-T4", "T4"),
    ("Tesla-V100-SXM2-16GB", "V100-SXM2-16GB"),
    ("Tesla-V100-SXM2-32GB", "V100-SXM2-32GB"),
    ("Tesla-V100-PCIE-32GB", "V100-PCIE-32GB"),
    ("NVIDIA-B200", "B200"),
    ("NVIDIA-GB200", "GB200"),
    ("NVIDIA-GH200-120GB", "GH200"),
]


@pytest.mark.parametrize(("value", "product"), [pytest.param(v, p, id=v) for v, p in GPUS_MD_GFD_VALUES])
def test_parse_every_gfd_value_of_gpus_md(value: str, product: str) -> None:
    parsed = CAT.parse_label(value)
    assert (parsed.value, parsed.product, parsed.shared, parsed.mig_profile) == (value, product, False, None)


@pytest.mark.parametrize(
    ("value", "product", "shared", "mig"),
    [
        pytest.param("NVIDIA-A100-SXM4-80GB-SHARED", "A100-SXM4-80GB", True, None, id="shared"),
        pytest.param("NVIDIA-A100-SXM4-80GB-MIG-1g.10gb", "A100-SXM4-80GB", False, "1g.10gb", id="mig"),
        pytest.param("NVIDIA-A100-SXM4-40GB-MIG-INVALID", "A100-SXM4-40GB", False, "INVALID", id="mig-invalid"),
        pytest.param("NVIDIA-H100-80GB-HBM3-MIG-3g.40gb-SHARED", "H100-SXM5-80GB", True, "3g.40gb",
                     id="mig-and-shared"),
        pytest.param("A100-SXM4-80GB", "A100-SXM4-80GB", False, None, id="legacy-no-prefix"),
        pytest.param("A100-SXM-80GB", "A100-SXM4-80GB", False, None, id="legacy-early-80gb-name"),
        pytest.param("A100-PCIE-40GB-MIG-1g.5gb", "A100-PCIE-40GB", False, "1g.5gb", id="legacy-with-mig"),
        pytest.param("H100-80GB-HBM3", "H100-SXM5-80GB", False, None, id="prefix-dropped-not-listed"),
        pytest.param("Tesla-T4-SHARED", "T4", True, None, id="tesla-shared"),
        pytest.param("nvidia-l40s", "L40S", False, None, id="case-insensitive"),
        pytest.param("NVIDIA-L4", "L4", False, None, id="l4-is-not-l40"),
        pytest.param("NVIDIA-L40", "L40", False, None, id="l40-is-not-l40s"),
        pytest.param("NVIDIA-A10", "A10", False, None, id="a10-is-not-a100"),
        pytest.param("NVIDIA-A30", None, False, None, id="unknown"),
        pytest.param("NVIDIA-A30-MIG-1g.6gb", None, False, "1g.6gb", id="unknown-with-mig"),
        pytest.param("", None, False, None, id="empty"),
        pytest.param("-SHARED", None, False, None, id="suffix-only"),
        pytest.param("NVIDIA-L4X", None, False, None, id="near-miss"),
        pytest.param("NVIDIA-", None, False, None, id="prefix-only"),
    ],
)
def test_parse_label_gfd_forms(value: str, product: str | None, shared: bool, mig: str | None) -> None:
    parsed = CAT.parse_label(value)
    assert (parsed.product, parsed.shared, parsed.mig_profile) == (product, shared, mig)


def test_exact_case_wins_over_case_insensitive() -> None:
    data = _raw()
    data["products"] = [
        {**data["products"][0], "id": "UPPER", "labels": {"gfd": ["CARD-X"]}},
        {**data["products"][1], "id": "LOWER", "labels": {"gfd": ["card-x"]}},
    ]
    cat = load_catalog(data)
    assert cat.parse_label("CARD-X").product == "UPPER"
    assert cat.parse_label("card-x").product == "LOWER"
    assert cat.parse_label("Card-X").product == "UPPER"  # folded match names both: least memory wins
    assert cat.named_products("Card-X") == ("UPPER", "LOWER")


@pytest.mark.parametrize(
    ("scheme", "value", "product", "named"),
    [
        pytest.param("gke", "nvidia-tesla-a100", "A100-SXM4-40GB", ("A100-SXM4-40GB",), id="gke-a100-40"),
        pytest.param("gke", "nvidia-a100-80gb", "A100-SXM4-80GB", ("A100-SXM4-80GB",), id="gke-a100-80"),
        pytest.param("gke", "nvidia-h100-mega-80gb", "H100-SXM5-80GB", ("H100-SXM5-80GB",), id="gke-h100-mega"),
        pytest.param("gke", "nvidia-h200-141gb", "H200", ("H200",), id="gke-h200"),
        pytest.param("gke", "nvidia-tesla-t4", "T4", ("T4",), id="gke-t4"),
        pytest.param("gke", "nvidia-l4-SHARED", None, (), id="gke-has-no-gfd-suffixes"),
        pytest.param("karpenter", "a100", "A100-SXM4-40GB", ("A100-SXM4-40GB", "A100-SXM4-80GB"),
                     id="karpenter-a100-is-coarse"),
        pytest.param("karpenter", "v100", "V100-SXM2-16GB", ("V100-SXM2-16GB", "V100-SXM2-32GB"),
                     id="karpenter-v100-is-coarse"),
        pytest.param("karpenter", "L40S", "L40S", ("L40S",), id="karpenter-case"),
        pytest.param("karpenter", "NVIDIA-L40S", None, (), id="karpenter-not-gfd-spelling"),
        pytest.param("amd", "AMD_Instinct_MI300X_OAM", "MI300X", ("MI300X",), id="amd-mi300x"),
        pytest.param("gfd", "NVIDIA-A100-SXM4-80GB-SHARED", "A100-SXM4-80GB", ("A100-SXM4-80GB",),
                     id="gfd-named-through-suffix"),
        # CoreWeave gpu.nvidia.com/class: every value its docs list for a catalog product
        pytest.param("coreweave", "H100_NVLINK_80GB", "H100-SXM5-80GB", ("H100-SXM5-80GB",), id="coreweave-h100-hgx"),
        pytest.param("coreweave", "H100_PCIE", "H100-PCIE-80GB", ("H100-PCIE-80GB",), id="coreweave-h100-pcie"),
        pytest.param("coreweave", "A100_NVLINK_80GB", "A100-SXM4-80GB", ("A100-SXM4-80GB",),
                     id="coreweave-a100-80-hgx"),
        pytest.param("coreweave", "A100_NVLINK", "A100-SXM4-40GB", ("A100-SXM4-40GB",), id="coreweave-a100-40-hgx"),
        pytest.param("coreweave", "A100_PCIE_80GB", "A100-PCIE-80GB", ("A100-PCIE-80GB",), id="coreweave-a100-80-pcie"),
        pytest.param("coreweave", "A100_PCIE_40GB", "A100-PCIE-40GB", ("A100-PCIE-40GB",), id="coreweave-a100-40-pcie"),
        pytest.param("coreweave", "Tesla_V100_NVLINK", "V100-SXM2-16GB", ("V100-SXM2-16GB",), id="coreweave-v100"),
        pytest.param("coreweave", "A40", None, (), id="coreweave-card-the-catalog-lacks"),
        pytest.param("coreweave", "H100SXM-80", None, (), id="coreweave-key-with-oris-vocabulary"),
        pytest.param("coreweave", "NVIDIA-H100-80GB-HBM3", None, (), id="coreweave-not-gfd-spelling"),
        # Volcano Engine VKE machine.cluster.vke.volcengine.com/gpu-name
        pytest.param("vke", "Tesla-V100", "V100-SXM2-16GB", ("V100-SXM2-16GB", "V100-SXM2-32GB", "V100-PCIE-32GB"),
                     id="vke-v100-is-coarse"),
        pytest.param("vke", "NVIDIA-L20", None, (), id="vke-l20-not-in-catalog"),
        # Alibaba ACK aliyun.accelerator/nvidia_name
        pytest.param("ack", "Tesla-V100-SXM2-16GB", "V100-SXM2-16GB", ("V100-SXM2-16GB",), id="ack-v100-16gb"),
        pytest.param("ack", "tesla-v100-sxm2-16gb", "V100-SXM2-16GB", ("V100-SXM2-16GB",), id="ack-case"),
        pytest.param("ack", "Tesla-V100-SXM2-16GB-SHARED", None, (), id="ack-has-no-gfd-suffixes"),
        pytest.param("ack", "NVIDIA-A10", None, (), id="ack-value-no-source-confirms"),
    ],
)
def test_parse_label_other_schemes(scheme: str, value: str, product: str | None, named: tuple[str, ...]) -> None:
    assert CAT.parse_label(value, scheme).product == product
    assert CAT.named_products(value, scheme) == named


def test_parse_label_unknown_scheme() -> None:
    with pytest.raises(ValueError, match="unknown label scheme 'aks'.*gfd"):
        CAT.parse_label("nvidia", "aks")


@given(
    st.sampled_from([(v, p.id) for p in CAT.products.values() for v in p.labels.get("gfd", ())]),
    st.sampled_from([None, "1g.10gb", "2g.20gb", "7g.80gb", "INVALID"]),
    st.booleans(),
    st.sampled_from([str, str.lower, str.upper]),
)
def test_parse_label_round_trips_every_catalog_value_with_any_suffix(
        pair: tuple[str, str], mig: str | None, shared: bool, case: Any) -> None:
    value, pid = pair
    label = case(value + (f"-MIG-{mig}" if mig else "") + ("-SHARED" if shared else ""))
    parsed = CAT.parse_label(label)
    assert parsed.product == pid
    assert parsed.shared is shared
    assert (parsed.mig_profile or "").upper() == (mig or "").upper()


# --------------------------------------------------------------------------- options


def _values(options: tuple[Any, ...]) -> list[str]:
    return [o.value for o in options]


@pytest.mark.parametrize(
    ("scheme", "products", "values"),
    [
        pytest.param("gfd", ["A100-SXM4-80GB", "H100-SXM5-80GB"],
                     ["NVIDIA-A100-SXM4-80GB", "A100-SXM4-80GB", "A100-SXM-80GB", "NVIDIA-H100-80GB-HBM3"],
                     id="gfd-legacy-pinned-too"),
        pytest.param("gfd", ["H100-SXM5-80GB", "A100-SXM4-80GB"],
                     ["NVIDIA-A100-SXM4-80GB", "A100-SXM4-80GB", "A100-SXM-80GB", "NVIDIA-H100-80GB-HBM3"],
                     id="gfd-input-order-irrelevant"),
        pytest.param("gfd", ["L40S", "L4", "T4"], ["NVIDIA-L40S", "NVIDIA-L4", "Tesla-T4"], id="gfd-cost"),
        pytest.param("gfd", ["MI300X"], [], id="gfd-skips-amd"),
        pytest.param("gke", ["A100-SXM4-80GB", "H100-SXM5-80GB", "L40S"],
                     ["nvidia-a100-80gb", "nvidia-h100-80gb", "nvidia-h100-mega-80gb"], id="gke-skips-l40s"),
        pytest.param("karpenter", ["A100-SXM4-80GB"], ["a100"], id="karpenter-coarse-a100"),
        pytest.param("karpenter", ["A100-SXM4-40GB", "A100-SXM4-80GB", "L40S"], ["a100", "l40s"],
                     id="karpenter-a100-once"),
        pytest.param("amd", ["MI300X", "H100-SXM5-80GB"], ["AMD_Instinct_MI300X_OAM"], id="amd"),
        pytest.param("coreweave", ["A100-SXM4-40GB", "A100-SXM4-80GB", "H100-SXM5-80GB", "H200", "L40S"],
                     ["A100_NVLINK", "A100_NVLINK_80GB", "H100_NVLINK_80GB"], id="coreweave-hbm-tier"),
        pytest.param("vke", ["V100-SXM2-32GB", "H100-SXM5-80GB"], ["Tesla-V100"], id="vke-coarse-v100"),
        pytest.param("ack", ["V100-SXM2-16GB", "V100-SXM2-32GB"], ["Tesla-V100-SXM2-16GB"], id="ack-v100"),
        pytest.param("gfd", [], [], id="empty"),
    ],
)
def test_options_values(scheme: str, products: list[str], values: list[str]) -> None:
    assert _values(CAT.options(products, scheme)) == values


def test_options_gfd_specs_are_the_products() -> None:
    opts = CAT.options(["A100-SXM4-80GB"])
    assert {o.spec.id for o in opts} == {"A100-SXM4-80GB"}
    assert all(o.products == ("A100-SXM4-80GB",) for o in opts)
    assert all(o.spec is CAT.product("A100-SXM4-80GB") for o in opts)


def test_karpenter_a100_spec_is_the_40gb_one() -> None:
    (opt,) = CAT.options(["A100-SXM4-80GB"], "karpenter")
    assert opt.value == "a100"
    assert opt.spec.id == "A100-SXM4-40GB"
    assert opt.spec.memory_gib == 40.0
    assert opt.spec.bandwidth_gbs == 1555
    assert opt.products == ("A100-SXM4-40GB", "A100-SXM4-80GB")


def test_karpenter_v100_spec_is_the_16gb_one() -> None:
    (opt,) = CAT.options(["V100-SXM2-32GB"], "karpenter")
    assert (opt.value, opt.spec.id) == ("v100", "V100-SXM2-16GB")


def test_vke_v100_spec_is_the_weakest_of_every_v100() -> None:
    """VKE's ``Tesla-V100`` says neither form factor nor memory: a node carrying it is sized as the
    16 GB card on the PCIe link, the worst V100 it may be."""
    (opt,) = CAT.options(["V100-SXM2-32GB"], "vke")
    assert opt.value == "Tesla-V100" and opt.products == ("V100-SXM2-16GB", "V100-SXM2-32GB", "V100-PCIE-32GB")
    assert (opt.spec.memory_gib, opt.spec.interconnect) == (CAT.product("V100-SXM2-16GB").memory_gib, "pcie")
    assert CAT.allreduce_latency_us(opt) == CAT.allreduce_us["V100-PCIE-32GB"]


def test_coarse_value_with_no_single_weakest_product_gets_a_synthetic_spec() -> None:
    data = _raw()
    big_slow = {"id": "BIG-SLOW", "memory_gib": 96, "bandwidth_gbs": 900, "interconnect": "pcie",
                "interconnect_gbs": 64, "compute_capability": "8.9", "family": "ada-lovelace",
                "memory_type": "GDDR6", "allreduce_us": 380, "labels": {"karpenter": ["mixed"]}}
    small_fast = {"id": "SMALL-FAST", "memory_gib": 48, "bandwidth_gbs": 3000, "interconnect": "nvlink",
                  "interconnect_gbs": 900, "compute_capability": "9.0", "family": "hopper",
                  "memory_type": "HBM3", "allreduce_us": 30, "labels": {"karpenter": ["mixed"]}}
    data["products"] += [big_slow, small_fast]
    cat = load_catalog(data)
    (opt,) = cat.options(["SMALL-FAST"], "karpenter")
    assert opt.products == ("BIG-SLOW", "SMALL-FAST")
    assert opt.spec.id == "BIG-SLOW|SMALL-FAST"
    assert (opt.spec.memory_gib, opt.spec.bandwidth_gbs, opt.spec.interconnect, opt.spec.interconnect_gbs) == (
        48, 900, "pcie", 64)
    assert (opt.spec.compute_capability, opt.spec.family) == ("8.9", "ada-lovelace")
    assert dict(opt.spec.labels) == {"karpenter": ("mixed",)}
    assert cat.allreduce_latency_us(opt) == 380
    assert cat.parse_label("mixed", "karpenter").product == "SMALL-FAST"  # least memory


def test_allreduce_latency_of_a_coarse_option_is_the_slowest() -> None:
    (opt,) = CAT.options(["A100-SXM4-80GB"], "karpenter")
    assert CAT.allreduce_latency_us(opt) == 45
    assert CAT.allreduce_latency_us(["A100-SXM4-80GB", "L40S"]) == 400
    with pytest.raises(ValueError):
        CAT.allreduce_latency_us([])


def test_options_unknown_product_or_scheme() -> None:
    with pytest.raises(KeyError, match="'A30'"):
        CAT.options(["A100-SXM4-80GB", "A30"])
    with pytest.raises(ValueError, match="unknown label scheme"):
        CAT.options(["A100-SXM4-80GB"], "aks")
    with pytest.raises(TypeError):
        CAT.options("L4")  # a bare string is an iterable of characters: refuse it


def test_options_ignore_duplicates_and_generators() -> None:
    a = CAT.options(iter(["L4", "L4", "L40S"]))
    b = CAT.options(["L40S", "L4"])
    assert a == b


@given(st.lists(st.sampled_from(list(CAT.products)), unique=True), st.sampled_from(list(CAT.schemes)),
       st.randoms(use_true_random=False))
def test_options_are_deterministic_and_order_free(ids: list[str], scheme: str, rnd: Any) -> None:
    first = CAT.options(ids, scheme)
    shuffled = list(ids)
    rnd.shuffle(shuffled)
    again = load_catalog(_raw()).options(shuffled, scheme)
    assert first == again
    values = _values(first)
    assert len(values) == len(set(values))
    for opt in first:
        assert set(opt.products) & set(ids)  # every option selects at least one requested product
        assert opt.spec.memory_gib == min(CAT.product(p).memory_gib for p in opt.products)
        assert opt.spec.bandwidth_gbs == min(CAT.product(p).bandwidth_gbs for p in opt.products)


# --------------------------------------------------------------------------- load_catalog validation


_set, _delete = set_at, delete_at


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        pytest.param(_set(("products", 3, "memory_gib"), -1), r"^products\[3\]\.memory_gib: must be a positive number",
                     id="negative-memory"),
        pytest.param(_set(("products", 0, "memory_gib"), "80"), r"^products\[0\]\.memory_gib: must be a positive number",
                     id="string-memory"),
        pytest.param(_set(("products", 0, "memory_gib"), True), r"^products\[0\]\.memory_gib: must be a positive",
                     id="bool-memory"),
        pytest.param(_set(("products", 1, "bandwidth_gbs"), 0), r"^products\[1\]\.bandwidth_gbs: must be a positive",
                     id="zero-bandwidth"),
        pytest.param(_set(("products", 1, "bandwidth_gbs"), float("nan")), r"^products\[1\]\.bandwidth_gbs:",
                     id="nan-bandwidth"),
        pytest.param(_set(("products", 2, "allreduce_us"), 0), r"^products\[2\]\.allreduce_us: must be a positive",
                     id="zero-allreduce"),
        pytest.param(_delete(("products", 4, "id")), r"^products\[4\]\.id: required field is missing",
                     id="missing-id"),
        pytest.param(_set(("products", 4, "id"), "H100 SXM"), r"^products\[4\]\.id: must not contain whitespace",
                     id="id-with-space"),
        pytest.param(_set(("products", 5, "id"), "A100-SXM4-40GB"),
                     r"^products\[5\]\.id: duplicate product id 'A100-SXM4-40GB' \(also products\[0\]\)",
                     id="duplicate-id"),
        pytest.param(_set(("products", 0, "interconnect"), "infiniband"),
                     r"^products\[0\]\.interconnect: must be one of", id="bad-interconnect"),
        pytest.param(_set(("products", 0, "compute_capability"), 8.0),
                     r"^products\[0\]\.compute_capability: must be a string", id="unquoted-cc"),
        pytest.param(_set(("products", 0, "memroy_gib"), 80), r"^products\[0\]\.memroy_gib: unknown field",
                     id="typo-field"),
        pytest.param(_set(("products", 0, "tier"), 3), r"^products\[0\]\.tier: must be a non-empty string",
                     id="bad-tier"),
        pytest.param(_set(("products", 0, "family"), ""), r"^products\[0\]\.family: must be a non-empty string",
                     id="empty-family"),
        pytest.param(_set(("products", 0, "labels"), ["NVIDIA-A100"]), r"^products\[0\]\.labels: must be a mapping",
                     id="labels-not-mapping"),
        pytest.param(_set(("products", 0, "labels", "aks"), ["nvidia"]),
                     r"^products\[0\]\.labels\.aks: unknown label scheme", id="labels-unknown-scheme"),
        pytest.param(_set(("products", 0, "labels", "gfd"), []), r"^products\[0\]\.labels\.gfd: must be a non-empty list",
                     id="labels-empty-list"),
        pytest.param(_set(("products", 0, "labels", "gfd"), ["NVIDIA A100"]),
                     r"^products\[0\]\.labels\.gfd\[0\]: 'NVIDIA A100' is not a valid label value", id="label-space"),
        pytest.param(_set(("products", 0, "labels", "gfd"), ["X", "Y", "X"]),
                     r"^products\[0\]\.labels\.gfd\[2\]: duplicate label value 'X'", id="label-duplicate"),
        pytest.param(_set(("products", 0, "labels", "gfd"), ["A" * 64]), r"^products\[0\]\.labels\.gfd\[0\]:",
                     id="label-too-long"),
        pytest.param(_set(("products", 0, "labels", "gfd"), [7]), r"^products\[0\]\.labels\.gfd\[0\]:",
                     id="label-not-string"),
        pytest.param(_set(("products", 6), "H100"), r"^products\[6\]: must be a mapping", id="product-not-mapping"),
        pytest.param(_set(("products",), []), r"^products: must be a non-empty list", id="no-products"),
        pytest.param(_delete(("products",)), r"^products: must be a non-empty list", id="missing-products"),
        pytest.param(_delete(("schemes",)), r"^schemes: must be a non-empty mapping", id="missing-schemes"),
        pytest.param(_set(("schemes", "gke"), ""), r"^schemes\.gke: must be a non-empty label key", id="empty-key"),
        pytest.param(_set(("version",), 2), r"^version: unknown field", id="unknown-top-level"),
    ],
)
def test_load_catalog_names_the_bad_field(mutate: Any, message: str) -> None:
    data = _raw()
    mutate(data)
    with pytest.raises(ValueError, match=message):
        load_catalog(data)


@pytest.mark.parametrize("data", [pytest.param([], id="list"), pytest.param("gpus", id="string"),
                                  pytest.param(0, id="number")])
def test_load_catalog_rejects_non_mappings(data: Any) -> None:
    with pytest.raises(ValueError, match="^catalog: must be a mapping"):
        load_catalog(data)


def test_optional_fields_take_defaults() -> None:
    data = _raw()
    data["products"].append({"id": "MY-CARD", "memory_gib": 48, "bandwidth_gbs": 960, "interconnect": "pcie",
                             "interconnect_gbs": 64, "compute_capability": "8.9", "family": "ada-lovelace",
                             "memory_type": "GDDR6", "labels": {"gfd": ["MY-VENDOR-CARD"]}})
    data["products"].append({"id": "NO-LABELS", "memory_gib": 16, "bandwidth_gbs": 300, "interconnect": "nvlink",
                             "interconnect_gbs": 300, "compute_capability": "7.0", "family": "volta",
                             "memory_type": "HBM2"})
    cat = load_catalog(data)
    assert cat.allreduce_us["MY-CARD"] == hardware.DEFAULT_ALLREDUCE_US["pcie"]
    assert cat.allreduce_us["NO-LABELS"] == hardware.DEFAULT_ALLREDUCE_US["nvlink"]
    assert "MY-CARD" not in cat.tiers["cost"]
    assert cat.parse_label("MY-VENDOR-CARD").product == "MY-CARD"
    assert cat.options(["NO-LABELS"]) == ()
    assert list(cat.products)[-2:] == ["MY-CARD", "NO-LABELS"]


def test_a_single_string_label_is_accepted_as_one_value() -> None:
    data = _raw()
    data["products"][0]["labels"]["gke"] = "nvidia-tesla-a100"
    assert load_catalog(data).product("A100-SXM4-40GB").labels["gke"] == ("nvidia-tesla-a100",)


def test_load_catalog_does_not_mutate_its_input_and_is_deterministic() -> None:
    data = _raw()
    before = copy.deepcopy(data)
    a, b = load_catalog(data), load_catalog(data)
    assert data == before
    assert list(a.products) == list(b.products) == list(CAT.products)
    assert a.products == b.products == CAT.products
    assert a.tiers == b.tiers and a.allreduce_us == b.allreduce_us
    for scheme in a.schemes:
        assert a.options(a.products, scheme) == b.options(b.products, scheme)


def test_catalog_data_is_read_only() -> None:
    with pytest.raises(TypeError):
        CAT.products["X"] = CAT.product("L4")  # type: ignore[index]
    with pytest.raises(TypeError):
        CAT.product("L4").labels["gfd"] = ("x",)  # type: ignore[index]
    with pytest.raises(AttributeError):
        CAT.schemes = {}  # type: ignore[misc]


def test_catalog_constructed_directly_builds_its_indexes() -> None:
    cat = Catalog(products={"L4": CAT.product("L4")}, schemes={"gfd": "nvidia.com/gpu.product"},
                  tiers={}, allreduce_us={"L4": 400.0})
    assert cat.parse_label("NVIDIA-L4").product == "L4"
    assert _values(cat.options(["L4"])) == ["NVIDIA-L4"]


# --------------------------------------------------------------------------- compute capability (read by sizing)

_FAMILY_CC = {"volta": (7, 0), "turing": (7, 5), "ampere": (8, 0), "ada-lovelace": (8, 9), "hopper": (9, 0),
              "blackwell": (10, 0)}


@pytest.mark.parametrize("pid", list(CAT.products))
def test_compute_capability_agrees_with_the_family(pid: str) -> None:
    """Sizing offers FP8 and FP4 checkpoints by compute capability: a product whose capability
    contradicts its GFD family would be offered (or refused) precisions it does not (or does) run."""
    product = CAT.product(pid)
    cc = hardware.compute_capability(product.compute_capability)
    if product.family == "cdna3":
        assert cc is None and product.compute_capability == "gfx942"
        assert hardware.native_formats(product.compute_capability) == {hardware.FP8}
        return
    assert cc is not None, pid
    low = _FAMILY_CC[product.family]
    assert low <= cc < (low[0] + 1, 0) or (product.family == "ampere" and cc[0] == 8 and cc < (8, 9)), pid
    fp8 = hardware.FP8 in hardware.native_formats(product.compute_capability)
    assert fp8 is (product.family in ("ada-lovelace", "hopper", "blackwell")), pid
