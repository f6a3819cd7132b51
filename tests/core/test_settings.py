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
    with pytest.raises(SettingsError, match=r"empty.yaml: the policy file is empty"):
        settings_mod.load(empty, read=Path.read_bytes)
    binary = tmp_path / "binary.yaml"
    binary.write_bytes(b"\xff\xfe\x00junk")
    with pytest.raises(SettingsError, match=r"binary.yaml: policy file is not UTF-8"):
        settings_mod.load(binary, read=Path.read_bytes)


HEADER = "apiVersion: gpu-admission.io/v1alpha1\nkind: Policy\n"
EMBEDDED = settings_mod.embedded_policy_text()


def test_the_embedded_default_states_apiversion_and_kind() -> None:
    doc = yaml.safe_load(EMBEDDED)
    assert doc["apiVersion"] == settings_mod.API_VERSION == "gpu-admission.io/v1alpha1"
    assert doc["kind"] == settings_mod.KIND == "Policy"
    assert settings_mod.parse_text(EMBEDDED, source="embedded default") == settings_mod.default()


@pytest.mark.parametrize(("text", "needle"), [
    pytest.param("", "the policy file is empty", id="empty"),
    pytest.param("\n  \n", "the policy file is empty", id="blank-lines"),
    pytest.param("".join(EMBEDDED.splitlines(keepends=True)[:3]), "the policy file is empty",
                 id="the-default-cut-after-three-lines"),
    pytest.param("# mode: audit\n", "the policy file is empty", id="only-a-comment"),
    pytest.param("- mode: audit\n", "must be a YAML mapping, got list", id="a-list"),
    pytest.param("audit\n", "must be a YAML mapping, got str", id="a-scalar"),
    pytest.param("{}\n", "apiVersion: missing", id="empty-mapping"),
    pytest.param("mode: audit\n", "apiVersion: missing", id="no-header"),
    pytest.param("apiVersion: gpu-admission.io/v1alpha1\n", "kind: missing", id="cut-after-apiversion"),
    pytest.param("kind: Policy\nmode: audit\n", "apiVersion: missing", id="no-apiversion"),
    pytest.param("apiVersion: gpu-admission.io/v1\nkind: Policy\n", "apiVersion: must be gpu-admission.io/v1alpha1",
                 id="wrong-apiversion"),
    pytest.param("apiVersion: v1\nkind: ConfigMap\ndata:\n  policy.yaml: ''\n", "apiVersion: must be",
                 id="a-configmap-not-its-policy"),
    pytest.param("apiVersion: gpu-admission.io/v1alpha1\nkind: Policies\n", "kind: must be Policy", id="wrong-kind"),
    pytest.param(HEADER + "mode: aud", "mode: 'aud' is not one of", id="cut-mid-value"),
    pytest.param(HEADER + "sizing:\n  memoryUtilization: 0.\n", "sizing.memoryUtilization", id="cut-mid-number"),
    pytest.param(HEADER + "tiers: 42\n", "tiers: 42 is not of type 'array'", id="schema-invalid"),
    pytest.param(HEADER + "modee: audit\n", "(top level)", id="typo-field"),
    pytest.param(HEADER + "mode: [audit\n", "invalid YAML", id="invalid-yaml"),
    pytest.param(HEADER + "---\n" + HEADER, "invalid YAML", id="two-documents"),
])
def test_a_policy_file_is_all_or_nothing(text: str, needle: str) -> None:
    with pytest.raises(SettingsError) as err:
        settings_mod.parse_text(text, source="policy.yaml")
    assert str(err.value).startswith("policy.yaml:") and needle in str(err.value), str(err.value)


@pytest.mark.parametrize("lines", range(EMBEDDED.splitlines().index("kind: Policy") + 1))
def test_every_cut_of_the_default_before_its_kind_is_refused(lines: int) -> None:
    """A file cut short (a half-written ConfigMap, a paste that stopped) must not become the embedded
    default, which enforces: every prefix of the default file up to its kind line is refused."""
    text = "".join(EMBEDDED.splitlines(keepends=True)[:lines])
    with pytest.raises(SettingsError, match=r"empty|missing"):
        settings_mod.parse_text(text, source="policy.yaml")


@pytest.mark.parametrize(("text", "check"), [
    pytest.param(HEADER, lambda s: s == settings_mod.default(), id="header-only-is-the-default"),
    pytest.param(HEADER + "mode: audit\n", lambda s: s.mode == "audit", id="header-and-a-field"),
    pytest.param("kind: Policy\napiVersion: gpu-admission.io/v1alpha1\nmode: audit\n", lambda s: s.mode == "audit",
                 id="any-order"),
    pytest.param(EMBEDDED, lambda s: s == settings_mod.default(), id="the-embedded-file"),
])
def test_whole_policy_files_load(text: str, check: Any) -> None:
    assert check(settings_mod.parse_text(text, source="embedded default"))


def test_code_made_documents_need_no_header() -> None:
    """from_mapping serves partial documents built in code (tests, the doors' defaults)."""
    assert settings_mod.from_mapping({"mode": "audit"}).mode == "audit"
    assert settings_mod.from_mapping({}) == settings_mod.default()


def test_generation_is_the_files_sha256(tmp_path: Path) -> None:
    import hashlib

    policy = tmp_path / "policy.yaml"
    policy.write_text(HEADER + "mode: audit\n")
    loaded = settings_mod.load(policy, read=Path.read_bytes)
    assert loaded.generation == hashlib.sha256(policy.read_bytes()).hexdigest()[:12]
    assert settings_mod.parse_text(policy.read_text(), source="other").generation == loaded.generation
    commented = settings_mod.parse_text(HEADER + "mode: audit\n# why\n", source=str(policy))
    assert commented == loaded and commented.generation != loaded.generation  # the same policy, another file
    assert settings_mod.default().generation == settings_mod.generation_of(EMBEDDED)
    assert settings_mod.parse_text(EMBEDDED, source="x").generation == settings_mod.default().generation
    assert len(settings_mod.from_mapping({"mode": "audit"}).generation) == 12
