"""Cloud instance types that carry one GPU product, as ``node.kubernetes.io/instance-type`` holds them.

Every cloud writes its machine name into the well-known instance-type label, and tutorials pin it:
EKS ``p5.48xlarge``, SageMaker HyperPod ``ml.g5.8xlarge``, AKS ``Standard_ND96isr_H100_v5``, OKE
``BM.GPU.H100.8``, GKE ``a3-highgpu-8g``. A name listed here is read as the product pin it is; a
name that is not (a CPU type, a new GPU type, a fractional vGPU size) is *unknown*, never wrong:
:mod:`webhook.core.pins` then resolves it through the inventory or warns that it cannot tell.

Only names whose GPU is one catalog product are listed. Left out on purpose: AWS g6f/gr6f, Azure
NVads A10 v5 below the full card and GCP g4-standard-6/12/24 (a fraction of a GPU), Google
Distributed Cloud ``-gdc`` machines (``a3-highgpu-1g-gdc`` is an H100 94GB, not the A3's 80GB),
products the catalog does not have (T4G, Radeon Pro V520, RTX PRO 4500/6000, B300), and names whose
product no source read for this table confirms (``a3-edgegpu-8g``, ``BM.GPU.B4.8``). Sources:

- AWS: aws/karpenter-provider-aws ``website/content/en/preview/reference/instance-types.md``
  (``karpenter.k8s.aws/instance-gpu-name`` per instance type; p3 from the v1.12 copy).
- SageMaker HyperPod: aws/sagemaker-hyperpod-cli ``helm_chart/HyperPodHelmChart/values.yaml`` pins its
  NVIDIA device plugin to ``ml.``-prefixed instance types; the GPU is the EC2 family's.
- Azure: kubernetes/autoscaler ``cluster-autoscaler/cloudprovider/azure/azure_instance_gpu_sku.go``
  (T4, A100 40GB/80GB/PCIe 80GB sizes) and MicrosoftDocs/azure-compute-docs
  ``articles/virtual-machines/sizes/gpu-accelerated/includes/*-specs.md`` (ND H100 v5: H100 80GB with
  NVLink; NC H100 v5: "PCIe H100 GPU (94GB)", the H100 NVL; ND H200 v5; ND MI300X v5).
- OCI: oracle-quickstart/oci-gpu-quickstarts ``nvidia/H100/README-H100.md`` (eight 80 GB H100),
  ``nvidia/H200/README-H200.md``, ``nvidia/B200/README-B200.md``; oracle-quickstart/oci-hpc-oke
  ``README.md`` (BM.GPU4.8 and BM.GPU.A100-v2.8 are its A100 shapes).
- GCP: GoogleCloudPlatform/cluster-toolkit ``modules/compute/gke-node-pool/gpu_definition.tf``
  (a2, a3-highgpu, g2 -> accelerator type) and AI-Hypercomputer/xpk
  ``src/xpk/core/system_characteristics.py`` (a3-mega, a3-ultra, a4, a4x).

Pure: strings in, catalog product ids out.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

INSTANCE_TYPE = "node.kubernetes.io/instance-type"

INSTANCE_FAMILIES: Mapping[str, str] = {
    # AWS EC2 GPU instance family (the part before the first dot) -> catalog product id
    "p4d": "A100-SXM4-40GB", "p4de": "A100-SXM4-80GB", "p5": "H100-SXM5-80GB", "p5e": "H200",
    "p5en": "H200", "p6-b200": "B200", "g6e": "L40S", "g6": "L4", "gr6": "L4", "g5": "A10G", "g4dn": "T4",
    "p3": "V100-SXM2-16GB", "p3dn": "V100-SXM2-32GB",
}
"""The EC2 families whose GPU is one product (Karpenter names p4d and p4de both ``a100``: the
memory, 40960 vs 81920 MiB, tells them apart). Also what a Karpenter NodePool may launch
(:mod:`webhook.core.nodepools`) and what a pin refused on EC2 is offered instead."""

SAGEMAKER_PREFIX = "ml."
"""SageMaker (HyperPod, endpoints, training jobs) names an EC2 type with this prefix: ``ml.g5.8xlarge``."""

AZURE_SIZES: Mapping[str, str] = {
    # Azure VM size, lower-cased (Azure compares sizes case-insensitively, as cluster-autoscaler does) -> product
    "standard_nc4as_t4_v3": "T4", "standard_nc8as_t4_v3": "T4", "standard_nc16as_t4_v3": "T4",
    "standard_nc64as_t4_v3": "T4",
    "standard_nd96asr_v4": "A100-SXM4-40GB", "standard_nd112asr_a100_v4": "A100-SXM4-40GB",
    "standard_nd120asr_a100_v4": "A100-SXM4-40GB",
    "standard_nd96asr_a100_v4": "A100-SXM4-40GB",  # Kaito's spelling of the ND A100 v4 size
    "standard_nd96amsr_a100_v4": "A100-SXM4-80GB", "standard_nd112amsr_a100_v4": "A100-SXM4-80GB",
    "standard_nd120amsr_a100_v4": "A100-SXM4-80GB",
    "standard_nc24ads_a100_v4": "A100-PCIE-80GB", "standard_nc48ads_a100_v4": "A100-PCIE-80GB",
    "standard_nc96ads_a100_v4": "A100-PCIE-80GB",
    "standard_nc40ads_h100_v5": "H100-NVL", "standard_nc80adis_h100_v5": "H100-NVL",
    "standard_nd96isr_h100_v5": "H100-SXM5-80GB", "standard_nd96isr_h200_v5": "H200",
    "standard_nd96isr_mi300x_v5": "MI300X",
    "standard_nv36ads_a10_v5": "A10", "standard_nv36adms_a10_v5": "A10", "standard_nv72ads_a10_v5": "A10",
    "standard_nc8ads_a10_v4": "A10", "standard_nc16ads_a10_v4": "A10", "standard_nc32ads_a10_v4": "A10",
}
"""Azure sizes do not split into a family and a size the way EC2 names do (the A100 40GB size
``Standard_ND96asr_v4`` does not even name its GPU), so they are listed one by one."""

OCI_SHAPES: Mapping[str, str] = {
    # Oracle Cloud shape -> product (OKE writes the shape into node.kubernetes.io/instance-type)
    "BM.GPU.H100.8": "H100-SXM5-80GB", "BM.GPU.H200.8": "H200", "BM.GPU.B200.8": "B200",
    "BM.GPU.A100-v2.8": "A100-SXM4-80GB", "BM.GPU4.8": "A100-SXM4-40GB",
    "BM.GPU.L40S.4": "L40S", "BM.GPU.MI300X.8": "MI300X",
    "VM.GPU.A10.1": "A10", "VM.GPU.A10.2": "A10", "BM.GPU.A10.4": "A10",
}

GCP_MACHINE_FAMILIES: Mapping[str, str] = {
    # GCE accelerator-optimized machine family (the name without its "-<N>g" / "-<N>" size) -> product,
    # through the accelerator type GKE writes into cloud.google.com/gke-accelerator (in brackets)
    "a2-highgpu": "A100-SXM4-40GB",     # nvidia-tesla-a100
    "a2-megagpu": "A100-SXM4-40GB",     # nvidia-tesla-a100
    "a2-ultragpu": "A100-SXM4-80GB",    # nvidia-a100-80gb
    "a3-highgpu": "H100-SXM5-80GB",     # nvidia-h100-80gb
    "a3-megagpu": "H100-SXM5-80GB",     # nvidia-h100-mega-80gb
    "a3-ultragpu": "H200",              # nvidia-h200-141gb
    "a4-highgpu": "B200",               # nvidia-b200
    "a4x-highgpu": "GB200",             # nvidia-gb200
    "g2-standard": "L4",                # nvidia-l4
}
GCP_ACCELERATORS: Mapping[str, str] = {
    "a2-highgpu": "nvidia-tesla-a100", "a2-megagpu": "nvidia-tesla-a100", "a2-ultragpu": "nvidia-a100-80gb",
    "a3-highgpu": "nvidia-h100-80gb", "a3-megagpu": "nvidia-h100-mega-80gb", "a3-ultragpu": "nvidia-h200-141gb",
    "a4-highgpu": "nvidia-b200", "a4x-highgpu": "nvidia-gb200", "g2-standard": "nvidia-l4",
}
"""The ``cloud.google.com/gke-accelerator`` value of each family: the tests check that the catalog
reads it as the product above, so the two tables cannot drift apart."""
_GCP_MACHINE = re.compile(r"([a-z][a-z0-9]*-[a-z]+)-([0-9]+g?)")


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
    ec2 = value.removeprefix(SAGEMAKER_PREFIX)
    if ec2 != value and "." not in ec2:
        return None  # "ml.g5" names no instance
    return INSTANCE_FAMILIES.get(ec2.split(".", 1)[0])
