"""The peers gpu-admission is measured against, built from their Go modules and cached outside the
checkout: Kyverno's admission controller for the end-to-end benchmark (build-kyverno.sh,
kyverno_admission.py, the equivalent ClusterPolicy kyverno-policy.yaml), and the offline peers."""
