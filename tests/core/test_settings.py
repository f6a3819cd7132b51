"""Policy file: the embedded default, merging, and errors that name the bad field."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from webhook.core import settings as settings_mod
from webhook.core.settings import SettingsError


def test_embedded_default() -> None:
    s = settings_mod.default()
    assert s.mode == "enforce" and s.mutate and not s.allow_audit_annotation
    assert s.label_key == "nvidia.com/gpu.product" and s.label_scheme == "gfd"
    assert s.gpu_resources == ("nvidia.com/gpu", "amd.com/gpu")  # issue 15: AMD GPUs count by default
    assert [t.name for t in s.tiers] == ["hbm-nvlink", "cost"]
    assert "A100-SXM4-80GB" in s.tier("hbm-nvlink").products and "L40S" in s.tier("cost").products
    assert s.large_model_params_b == 30


def test_embedded_text_is_the_default() -> None:
    text = settings_mod.embedded_policy_text()
    assert "#" in text  # commented for people
    assert settings_mod.parse_text(text, source="x") == settings_mod.from_mapping(yaml.safe_load(text), source="x")


@pytest.mark.parametrize(("raw", "check"), [
    pytest.param({"mode": "audit"}, lambda s: s.mode == "audit", id="mode"),
    pytest.param({"sizing": {"memoryUtilization": 0.8}}, lambda s: s.memory_utilization == 0.8 and s.overhead_gib == 2,
                 id="nested-merge-keeps-siblings"),
    pytest.param({"productLabel": "karpenter.k8s.aws/instance-gpu-name"}, lambda s: s.label_scheme == "karpenter",
                 id="scheme-derived-karpenter"),
    pytest.param({"productLabel": "cloud.google.com/gke-accelerator"}, lambda s: s.label_scheme == "gke",
                 id="scheme-derived-gke"),
    pytest.param({"gpuResources": ["amd.com/gpu"]}, lambda s: s.gpu_resources == ("amd.com/gpu",), id="resources"),
    pytest.param({"tiers": [{"name": "big", "products": ["H100-SXM5-80GB"]}, {"name": "small", "products": ["L4"]}],
                  "rules": {"multiGpuTier": "big", "largeModelTier": "big", "smallModelTier": "small"}},
                 lambda s: [t.name for t in s.tiers] == ["big", "small"], id="custom-tiers"),
    pytest.param({"products": [{"id": "MY-CARD", "memory_gib": 48, "bandwidth_gbs": 960, "interconnect": "pcie",
                                "interconnect_gbs": 64, "compute_capability": "8.9", "family": "ada-lovelace",
                                "memory_type": "GDDR6", "labels": {"gfd": ["MY-VENDOR-CARD"]}}],
                  "tiers": [{"name": "hbm-nvlink", "products": ["H100-SXM5-80GB"]},
                            {"name": "cost", "products": ["MY-CARD"], "multiGpu": False}]},
                 lambda s: "MY-CARD" in s.catalog.products, id="extra-product"),
])
def test_valid_overrides(raw: dict[str, Any], check: Any) -> None:
    assert check(settings_mod.from_mapping(raw))


@pytest.mark.parametrize(("raw", "field"), [
    pytest.param({"mode": "strict"}, "mode", id="bad-mode"),
    pytest.param({"modee": "audit"}, "(top level)", id="typo-field"),
    pytest.param({"largeModelParamsB": "lots"}, "largeModelParamsB", id="wrong-type"),
    pytest.param({"sizing": {"memoryUtilization": 1.5}}, "sizing.memoryUtilization", id="out-of-range"),
    pytest.param({"tiers": [{"name": "x", "products": ["L40Z"]}]}, "tiers[0].products[0]", id="unknown-product"),
    pytest.param({"tiers": [{"name": "Bad Name", "products": ["L4"]}]}, "tiers[0].name", id="bad-tier-name"),
    pytest.param({"rules": {"multiGpuTier": "gold"}}, "rules.multiGpuTier", id="rule-names-no-tier"),
    pytest.param({"gpuResources": []}, "gpuResources", id="no-resources"),
    pytest.param({"productLabel": "example.com/gpu"}, "labelScheme", id="underivable-scheme"),
    pytest.param({"labelScheme": "aks"}, "labelScheme", id="unknown-scheme"),
    pytest.param({"products": [{"id": "X", "memory_gib": -1}]}, "products", id="bad-product"),
    pytest.param(["not", "a", "mapping"], "mapping", id="not-a-mapping"),
])
def test_errors_name_the_field(raw: Any, field: str) -> None:
    with pytest.raises(SettingsError) as err:
        settings_mod.from_mapping(raw, source="policy.yaml")
    assert "policy.yaml" in str(err.value) and field in str(err.value)


def test_file_errors(tmp_path: Path) -> None:
    with pytest.raises(SettingsError, match="cannot read"):
        settings_mod.load(tmp_path / "missing.yaml", read=Path.read_bytes)
    bad = tmp_path / "bad.yaml"
    bad.write_text("mode: enforce\ntiers: [\n")
    with pytest.raises(SettingsError, match=r"bad.yaml: line \d+: invalid YAML"):
        settings_mod.load(bad, read=Path.read_bytes)
    empty = tmp_path / "empty.yaml"
    empty.write_text("")
    assert settings_mod.load(empty, read=Path.read_bytes).mode == "enforce"
