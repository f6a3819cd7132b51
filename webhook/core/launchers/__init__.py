"""Container -> ``LaunchSpec``: which launcher runs, which model, how much parallelism.

``shell`` turns the container into plain argv tuples; this package recognises the launcher in one
of them and reads its flags through one small table per framework. Modules, in pipeline order:

- ``values``: strict value converters and the fields they feed (``canonical_dtype``...)
- ``flags``: per-framework flag tables (spelling -> field) and ``norm_flag``
- ``scan``: reading an argv with a flag table
- ``spec``: the builder that turns raw values into a LaunchSpec and explains
  what is hidden
- ``context``: what a parser may know about the container (env with secrets withheld, image)
- one parser module per family: ``serving`` (vLLM, TGI, SGLang, TensorRT-LLM, KServe, LMDeploy,
  Ollama) with ``parallel`` (vLLM/SGLang data and expert parallelism), ``nim``, ``embedding`` (TEI,
  Infinity), ``llamacpp``, ``repository`` (Triton, TorchServe), ``diffusion`` (ComfyUI, A1111,
  InvokeAI), ``training``
- ``programs``, ``detection``: argv -> program -> known launcher
- ``container``: ``parse_container``, the entry point
- ``generic``: ``parse_env_model``, the last resort for a GPU container no launcher runs
"""

from __future__ import annotations

from webhook.core.launchers.container import parse_container
from webhook.core.launchers.flags import Flag, norm_flag
from webhook.core.launchers.fallback import parse_env_model
from webhook.core.launchers.values import canonical_dtype, canonical_quantization

__all__ = ["parse_container", "parse_env_model", "Flag", "canonical_dtype", "canonical_quantization", "norm_flag"]
