"""Objects the end-to-end tests send: vLLM pods (Llama-3.1-70B at TP4 unless told otherwise), the
workloads that template them, and a reader for the product affinity the webhook injects."""

from __future__ import annotations

GPU = "nvidia.com/gpu"
PRODUCT_LABEL = "nvidia.com/gpu.product"


def vllm_container(gpus: int | None = 4, *, key: str = "limits") -> dict:
    container = {"name": "vllm", "image": "vllm/vllm-openai:v0.10.1",
                 "command": ["vllm", "serve", "meta-llama/Llama-3.1-70B-Instruct", "--tensor-parallel-size", "4"]}
    if gpus is not None:
        container["resources"] = {key: {GPU: str(gpus)}}
        if key == "limits" and gpus > 1:
            # Guaranteed QoS with whole CPUs, as a production multi-GPU server is: the kubelet can align
            # its CPUs with its GPUs (otherwise the webhook adds a numa-unaligned warning)
            container["resources"]["limits"].update(cpu=str(4 * gpus), memory=f"{16 * gpus}Gi")
    return container


def pod_spec(*, gpus: int | None = 4, pin: str | None = None, init_gpus: int | None = None) -> dict:
    spec: dict = {"containers": [vllm_container(gpus)]}
    if pin:
        spec["nodeSelector"] = {PRODUCT_LABEL: pin}
    if init_gpus is not None:
        spec["initContainers"] = [{"name": "warmup", "image": "busybox:1.36", "command": ["true"],
                                   "resources": {"limits": {GPU: str(init_gpus)}}}]
    return spec


def vllm_pod(name: str, namespace: str, **kw) -> dict:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": namespace},
            "spec": pod_spec(**kw)}


def template(**kw) -> dict:
    return {"metadata": {"labels": {"app": "llm"}}, "spec": pod_spec(**kw)}


def deployment(name: str, namespace: str, **kw) -> dict:
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "namespace": namespace},
            "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "llm"}}, "template": template(**kw)}}


def cronjob(name: str, namespace: str, **kw) -> dict:
    tpl = template(**kw)
    tpl["spec"]["restartPolicy"] = "Never"
    return {"apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"name": name, "namespace": namespace},
            "spec": {"schedule": "0 3 * * *", "jobTemplate": {"spec": {"template": tpl}}}}


def lws_object(name: str, namespace: str, *, worker_gpus: int | None, leader_gpus: int | None = None,
               pin: str | None = None) -> dict:
    def tpl(gpus: int | None) -> dict:
        return {"spec": pod_spec(gpus=gpus, pin=pin)}

    lwt: dict = {"size": 2, "workerTemplate": tpl(worker_gpus)}
    if leader_gpus is not None or worker_gpus is None:
        lwt["leaderTemplate"] = tpl(leader_gpus)
    return {"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"replicas": 1, "leaderWorkerTemplate": lwt}}


def product_affinity(obj: dict) -> list[str] | None:
    terms = (obj["spec"].get("affinity", {}).get("nodeAffinity", {})
             .get("requiredDuringSchedulingIgnoredDuringExecution", {}).get("nodeSelectorTerms", []))
    for term in terms:
        for expr in term.get("matchExpressions", []):
            if expr["key"] == PRODUCT_LABEL:
                return expr["values"]
    return None


def stand_in_crd(group: str, version: str | tuple[str, ...], kind: str, plural: str,
                 scope: str = "Namespaced") -> dict:
    """A minimal CRD, a stand-in for an operator this e2e does not run: any spec is kept
    (x-kubernetes-preserve-unknown-fields), no validation, no defaults, no status subresource.
    Several versions are all served (the first is stored; with no conversion webhook the API server
    only rewrites apiVersion, which is what a stand-in needs: KubeRay's v1alpha1 and v1 RayCluster
    share the fields read)."""
    versions = (version,) if isinstance(version, str) else version
    schema = {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}}
    return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": f"{plural}.{group}"},
            "spec": {"group": group, "scope": scope,
                     "names": {"kind": kind, "plural": plural, "singular": kind.lower(), "listKind": f"{kind}List"},
                     "versions": [{"name": v, "served": True, "storage": i == 0, "schema": schema}
                                  for i, v in enumerate(versions)]}}
