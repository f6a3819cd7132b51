"""Per-framework flag tables: every spelling a launcher accepts -> the field it sets.

One small table per framework (plus the Hydra override keys NeMo and Lightning scripts use), so
adding a spelling is a one-line change and every spelling is testable from a table. The tables say
only what a flag means and whether it takes a value; ``scan`` reads argvs with them.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Flag:
    """What one flag spelling means: the field it sets and whether it takes a value.

    ``field`` is a key of ``FIELDS``, a parser-specific name (``config``, ``sharded``,
    ``ep_enabled``...) or ``""`` for flags that only need to be skipped correctly. ``kind`` is
    ``value``, ``bool`` (never takes the next token) or ``optbool`` (takes it only when it is
    ``true``/``false``, like TGI's ``--sharded true`` and HF Trainer's ``--bf16 True``).
    """

    field: str
    kind: str = "value"


def norm_flag(spelling: str) -> str:
    """Lower-case with ``_`` -> ``-`` after the leading dashes: every spelling looks the same."""
    stripped = spelling.lstrip("-")
    return spelling[: len(spelling) - len(stripped)] + stripped.replace("_", "-").lower()


def _table(*rows: tuple[str, str, str]) -> dict[str, Flag]:
    """Rows of (space-separated spellings, field, kind) -> lookup by normalised spelling."""
    out: dict[str, Flag] = {}
    for spellings, fld, kind in rows:
        for spelling in spellings.split():
            out[norm_flag(spelling)] = Flag(fld, kind)
    return out


V, B, OB = "value", "bool", "optbool"

VLLM_FLAGS = _table(
    ("--model", "model", V),
    ("--tensor-parallel-size -tp", "tensor_parallel", V),
    ("--pipeline-parallel-size -pp", "pipeline_parallel", V),
    ("--data-parallel-size -dp", "data_parallel", V),
    ("--nnodes", "nnodes", V),
    ("--enable-expert-parallel -ep", "ep_enabled", B),
    ("--dtype", "dtype", V),
    ("--quantization -q", "quantization", V),
    ("--kv-cache-dtype", "kv_cache_dtype", V),
    ("--gpu-memory-utilization", "gpu_memory_utilization", V),
    ("--config", "config", V),
    ("--data-parallel-size-local -dpl", "data_parallel_local", V),
    ("--data-parallel-rank -dpn", "dp_rank", V),
    ("--task --runner --convert", "task", V),
    (
        "--served-model-name --tokenizer --node-rank -O --data-parallel-start-rank -dpr "
        "--data-parallel-address -dpa --data-parallel-rpc-port -dpp --data-parallel-backend -dpb "
        "--api-server-count -asc --all2all-backend --distributed-executor-backend",
        "", V,
    ),
    (
        "--trust-remote-code --enforce-eager --enable-prefix-caching --no-enable-prefix-caching "
        "--enable-chunked-prefill --no-enable-chunked-prefill --disable-log-requests "
        "--enable-log-requests --disable-log-stats --enable-auto-tool-choice --enable-lora "
        "--disable-custom-all-reduce --enable-reasoning --headless --enable-sleep-mode "
        "--disable-frontend-multiprocessing --async-scheduling --data-parallel-hybrid-lb "
        "--data-parallel-external-lb --enable-eplb --enable-dbo --disable-fastapi-docs "
        "--enable-prompt-tokens-details --enable-server-load-tracking --enable-force-include-usage "
        "--enable-request-id-headers --skip-tokenizer-init --disable-sliding-window "
        "--disable-cascade-attn --enable-prompt-embeds --disable-uvicorn-access-log "
        "--disable-async-output-proc --return-tokens-as-token-ids --fully-sharded-loras "
        "--allow-credentials --enable-log-outputs --use-v2-block-manager",
        "", B,
    ),
)

TGI_FLAGS = _table(
    ("--model-id", "model", V),
    ("--num-shard", "tensor_parallel", V),
    ("--sharded", "sharded", OB),
    ("--quantize", "quantization", V),
    ("--dtype", "dtype", V),
    ("--kv-cache-dtype", "kv_cache_dtype", V),
    ("--cuda-memory-fraction", "gpu_memory_utilization", V),
    (
        "--trust-remote-code --disable-custom-kernels --json-output --disable-grammar-support "
        "--enable-prefill-logprobs --disable-usage-stats",
        "", B,
    ),
)

SGLANG_FLAGS = _table(
    ("--model-path --model", "model", V),
    ("--tensor-parallel-size --tp-size --tp", "tensor_parallel", V),
    ("--pipeline-parallel-size --pp-size --pp", "pipeline_parallel", V),
    ("--data-parallel-size --dp-size --dp", "data_parallel", V),
    ("--expert-parallel-size --ep-size --ep", "expert_parallel", V),
    ("--nnodes", "nnodes", V),
    ("--mem-fraction-static", "gpu_memory_utilization", V),
    ("--quantization", "quantization", V),
    ("--dtype", "dtype", V),
    ("--kv-cache-dtype", "kv_cache_dtype", V),
    ("--config", "config", V),
    ("--enable-ep-moe", "ep_enabled", B),
    ("--enable-deepep-moe", "ep_all_to_all", B),
    ("--moe-a2a-backend", "a2a_backend", V),
    ("--enable-dp-attention", "dp_attention", B),
    ("--is-embedding", "embedding", B),
    (
        "--served-model-name --tokenizer-path --node-rank --dist-init-addr --moe-dense-tp-size "
        "--deepep-mode --moe-runner-backend --disaggregation-mode --ep-num-redundant-experts",
        "", V,
    ),
    (
        "--trust-remote-code --enable-torch-compile "
        "--disable-radix-cache --enable-metrics --log-requests --disable-cuda-graph "
        "--enable-mixed-chunk --skip-server-warmup --enable-dp-lm-head --disable-overlap-schedule "
        "--enable-cache-report --enable-hierarchical-cache --enable-nan-detection --show-time-cost "
        "--skip-tokenizer-init --enable-p2p-check --disable-custom-all-reduce --enable-memory-saver "
        "--allow-auto-truncate --enable-multimodal",
        "", B,
    ),
)

TRTLLM_FLAGS = _table(
    # tensorrt_llm/commands/serve.py (click options of ``serve``)
    ("--tensor-parallel-size --tp-size", "tensor_parallel", V),
    ("--pipeline-parallel-size --pp-size", "pipeline_parallel", V),
    ("--moe-expert-parallel-size --ep-size", "expert_parallel", V),
    ("--extra-llm-api-options --config", "config", V),
    (
        "--backend --tokenizer --custom-tokenizer --gpus-per-node --moe-cluster-parallel-size "
        "--cluster-size --context-parallel-size --cp-size --free-gpu-memory-fraction "
        "--kv-cache-free-gpu-memory-fraction --max-batch-size --max-num-tokens --max-seq-len "
        "--max-beam-width --num-postprocess-workers --host --port --log-level --revision "
        "--reasoning-parser --tool-parser --server-role --metadata-server-config-file "
        "--disagg-cluster-uri --otlp-traces-endpoint --media-io-kwargs --chat-template",
        "", V,
    ),
    ("--trust-remote-code --enable-chunked-prefill --fail-fast-on-attention-window-too-large", "", B),
)

TEI_FLAGS = _table(
    # text-embeddings-inference router/src/main.rs (clap, each with an env twin: MODEL_ID, DTYPE...)
    ("--model-id", "model", V),
    ("--dtype", "dtype", V),
    (
        "--revision --tokenization-workers --served-model-name --pooling --max-concurrent-requests "
        "--max-batch-tokens --max-batch-requests --max-client-batch-size --default-prompt-name "
        "--default-prompt --dense-path --device-id --hf-api-token --hf-token --hostname --port -p "
        "--uds-path --huggingface-hub-cache --payload-limit --api-key --otlp-endpoint "
        "--otlp-service-name --prometheus-port --cors-allow-origin",
        "", V,
    ),
    ("--auto-truncate --json-output --disable-spans", "", B),
)

INFINITY_FLAGS = _table(
    # infinity docs/docs/cli_v2.md (``infinity_emb v2``; v1 spelled the model --model-name-or-path)
    ("--model-id --model-name-or-path", "model", V),
    ("--dtype", "dtype", V),
    ("--device", "device", V),
    (
        "--served-model-name --batch-size --revision --engine --embedding-dtype --pooling-method "
        "--host --port --url-prefix --redirect-slash --log-level --api-key --proxy-root-path --device-id",
        "", V,
    ),
    (
        "--trust-remote-code --no-trust-remote-code --model-warmup --no-model-warmup "
        "--vector-disk-cache --no-vector-disk-cache --lengths-via-tokenize --no-lengths-via-tokenize "
        "--compile --no-compile --bettertransformer --no-bettertransformer --preload-only "
        "--no-preload-only --permissive-cors --no-permissive-cors",
        "", B,
    ),
)

LLAMACPP_FLAGS = _table(
    # llama.cpp tools/server/README.md (common params; each has an LLAMA_ARG_* env twin)
    ("-m --model", "model", V),
    ("-hf -hfr --hf-repo", "hf_repo", V),
    ("-hff --hf-file", "hf_file", V),
    ("-mu --model-url", "model_url", V),
    ("-ngl --gpu-layers --n-gpu-layers", "gpu_layers", V),
    ("-sm --split-mode", "split_mode", V),
    ("-ts --tensor-split", "tensor_split", V),
    ("--embedding --embeddings --reranking --rerank", "embedding", B),
    (
        "-c --ctx-size -np --parallel -t --threads -tb --threads-batch -b --batch-size -ub "
        "--ubatch-size -ctk --cache-type-k -ctv --cache-type-v -mg --main-gpu -dev --device "
        "--host --port -a --alias --api-key --rpc -fa --flash-attn --pooling -ot --override-tensor",
        "", V,
    ),
    ("--cont-batching --no-mmap --mlock --metrics --jinja --no-webui -cmoe --cpu-moe", "", B),
)

TORCHSERVE_FLAGS = _table(
    # pytorch/serve docs/configuration.md "Command line parameters"; --models takes several values
    ("--model-store", "model_store", V),
    ("--ts-config", "config", V),
    ("--models", "models", V),
    ("--log-config --workflow-store --plugins-path", "", V),
    (
        "--start --stop --foreground --ncs --no-config-snapshots --disable-token-auth "
        "--enable-model-api",
        "", B,
    ),
)

TS_LLM_FLAGS = _table(
    # pytorch/serve ts/llm_launcher.py (argparse)
    ("--model-id", "model", V),
    ("--engine", "engine", V),
    ("--dtype", "dtype", V),
    ("--model-name --model-store --startup-timeout --vllm-engine.max-num-seqs "
     "--vllm-engine.max-model-len --vllm-engine.download-dir --trt-llm-engine.max-batch-size "
     "--trt-llm-engine.kv-cache-free-gpu-memory-fraction", "", V),
    ("--disable-token-auth", "", B),
)

TRITONSERVER_FLAGS = _table(
    # triton-inference-server/server src/command_line_parser.cc: --model-store = --model-repository
    ("--model-repository --model-store", "model_repository", V),
    (
        "--model-control-mode --load-model --backend-config --http-port --grpc-port --metrics-port "
        "--log-verbose --log-file --cache-config --backend-directory --repoagent-directory",
        "", V,
    ),
    ("--allow-metrics --allow-gpu-metrics --disable-auto-complete-config", "", B),
)

A1111_FLAGS = _table(
    # AUTOMATIC1111/stable-diffusion-webui modules/cmd_args.py (Forge and SD.Next share them)
    ("--ckpt", "model", V),
    ("--ckpt-dir --device-id --port --data-dir --vae-path --vae-dir --server-name --ui-settings-file", "", V),
    (
        "--listen --api --xformers --no-half --no-half-vae --medvram --lowvram --skip-torch-cuda-test "
        "--enable-insecure-extension-access --nowebui --opt-sdp-attention",
        "", B,
    ),
)

TRITON_FLAGS = _table(
    ("--world-size", "procs_per_node", V),
    ("--model-repo --tritonserver --grpc-port --http-port --metrics-port --log-file", "", V),
    ("--multi-model --oversubscribe --disable-spawn-processes --no-mpi --log", "", B),
)

TRTLLM_SCRIPT_FLAGS = _table(
    # A TensorRT-LLM engine served by a launch script of its own (``python3 server.py leader --tp=2
    # --pp=8 ...``): triton-inference-server/tutorials Deployment/Kubernetes/
    # TensorRT-LLM_Multi-Node_Distributed_Models/containers/server.py @ 5dd47254fbc4d4267a3cbd8809f211cf438ffa3d
    # (argparse: mode, --model, --dt, --pp, --tp, both default 1; the leader runs mpirun -np TP*PP
    # tritonserver) and its LWS adaptation kubernetes-sigs/lws docs/examples/tensorrt-llm/build/server.py
    # @ 4aaf9d50f5422da7bf395a4494c8078bb11ead21 (--triton_model_repo_dir, --gpu_per_node,
    # --stateful_set_group_key); the long spellings are trtllm-serve's (tensorrt_llm/commands/serve.py).
    # ``--tp_size``/``--pp_size`` are deliberately absent: TensorRT-LLM's convert_checkpoint.py takes them
    # for the checkpoint it writes (lws install_model.sh above runs it with --tp_size 8 --pp_size 2), and
    # a converter is no server.
    ("--tp --tensor-parallel-size", "tensor_parallel", V),
    ("--pp --pipeline-parallel-size", "pipeline_parallel", V),
    ("--model", "model", V),
    ("--dt", "dtype", V),
    ("--triton-model-repo-dir --gpu-per-node --stateful-set-group-key --namespace --deployment", "", V),
    ("--verbose --iso8601 --multinode --noconvert --enable-nsys", "", B),
)

KSERVE_FLAGS = {
    **VLLM_FLAGS,
    **_table(
        ("--model-id", "model", V),
        ("--model-dir", "model_dir", V),
        ("--model", "", V),  # vLLM's own --model is overwritten by the runtime
        ("--model-name --model-revision --tokenizer-revision --backend --task --max-length", "", V),
        (
            "--disable-lower-case --disable-special-tokens --return-token-type-ids "
            "--return-probabilities --enable-docs-url",
            "", B,
        ),
    ),
}

LMDEPLOY_FLAGS = _table(
    ("--tp", "tensor_parallel", V),
    ("--dp", "data_parallel", V),
    ("--ep", "expert_parallel", V),
    ("--nnodes", "nnodes", V),
    ("--dtype", "dtype", V),
    ("--model-format", "model_format", V),
    ("--quant-policy", "quant_policy", V),
    ("--model-name --backend --server-port --server-name --cache-max-entry-count --session-len", "", V),
    ("--enable-prefix-caching --eager-mode", "", B),
)

TORCHRUN_FLAGS = _table(
    ("--nproc-per-node", "nproc", V),
    ("--nnodes", "nnodes", V),
    (
        "--node-rank --rdzv-backend --rdzv-endpoint --rdzv-id --rdzv-conf --master-addr "
        "--master-port --max-restarts --monitor-interval --start-method --role --log-dir -r "
        "--redirects -t --tee --local-addr --logs-specs --local-ranks-filter --numa-binding",
        "", V,
    ),
    ("--standalone --no-python -m --module --run-path --use-env --virtual-local-rank", "", B),
)

ACCELERATE_FLAGS = _table(
    # accelerate src/accelerate/commands/launch.py (launch_command_parser)
    ("--num-processes", "total_procs", V),
    ("--num-machines", "nnodes", V),
    ("--mixed-precision", "mixed_precision", V),
    ("--config-file", "config", V),
    ("--megatron-lm-tp-degree", "tensor_parallel", V),
    ("--megatron-lm-pp-degree", "pipeline_parallel", V),
    # the training strategy (launchers.strategy)
    ("--multi-gpu", "multi_gpu", B),
    ("--use-deepspeed", "use_deepspeed", B),
    ("--use-fsdp", "use_fsdp", B),
    ("--use-megatron-lm", "use_megatron_lm", B),
    ("--zero-stage", "zero_stage", V),
    ("--deepspeed-config-file", "deepspeed_config_file", V),
    ("--offload-optimizer-device", "offload_optimizer_device", V),
    ("--offload-param-device", "offload_param_device", V),
    ("--fsdp-sharding-strategy", "fsdp_sharding_strategy", V),
    ("--fsdp-reshard-after-forward", "fsdp_reshard_after_forward", V),
    ("--fsdp-offload-params", "fsdp_offload_params", V),
    ("--megatron-lm-use-distributed-optimizer", "megatron_distributed_optimizer", V),
    (
        "--machine-rank --main-process-ip --main-process-port --gpu-ids --dynamo-backend "
        "--num-cpu-threads-per-process --rdzv-backend "
        "--deepspeed-multinode-launcher --fsdp-auto-wrap-policy "
        "--fsdp-transformer-layer-cls-to-wrap --fsdp-state-dict-type --fsdp-backward-prefetch "
        "--gradient-accumulation-steps --gradient-clipping --fsdp-version "
        "--max-restarts --monitor-interval",
        "", V,
    ),
    (
        "--use-xpu --cpu -m --module --no-python "
        "--debug -q --quiet --same-network --enable-cpu-affinity",
        "", B,
    ),
)

TRL_FLAGS = {
    # trl/cli: what the TRL script does not take goes to ``accelerate launch``; --accelerate_config
    # names a file or one of the configs TRL ships (trl/cli/accelerate_config.py)
    **ACCELERATE_FLAGS,
    **_table(("--accelerate-config", "accelerate_config", V)),
}

XDIT_FLAGS = _table(
    # xdit-project/xDiT xfuser/config/args.py @ 045d2f903eb67138e9515fa8e004a1819556bb1c (xFuserArgs):
    # the parallel degrees of a diffusion launch (its FlexibleArgumentParser takes - for _)
    ("--pipefusion-parallel-degree", "pipefusion_parallel_degree", V),
    ("--ulysses-degree", "ulysses_degree", V),
    ("--ring-degree", "ring_degree", V),
    ("--use-cfg-parallel", "use_cfg_parallel", B),
    ("--data-parallel-degree", "data_parallel_degree", V),
    ("--tensor-parallel-degree", "tensor_parallel_degree", V),
    # DeepSpeedExamples inference-test.py: run deepspeed.init_inference
    ("--ds-inference", "ds_inference", B),
)
"""The flags that tell an inference script run by a training launcher (``launchers.inference_scripts``)."""

DEEPSPEED_FLAGS = _table(
    ("--num-gpus", "procs_per_node", V),
    ("--num-nodes", "nnodes", V),
    ("--hostfile -H --include -i --exclude -e", "hosts", V),
    (
        "--master-port --master-addr --launcher --launcher-args --node-rank --autotuning "
        "--ssh-port --min-elastic-nodes --max-elastic-nodes --venv-script --bind-core-list",
        "", V,
    ),
    (
        "--no-python --module --no-local-rank --force-multi --save-pid --bind-cores-to-rank "
        "--elastic-training --no-ssh --no-ssh-check",
        "", B,
    ),
)

SCRIPT_FLAGS = _table(
    (
        "--model-name-or-path --model --base-model --pretrained-model-name-or-path --factory",
        "model", V,
    ),
    ("--tensor-model-parallel-size", "tensor_parallel", V),
    ("--pipeline-model-parallel-size", "pipeline_parallel", V),
    ("--expert-model-parallel-size", "expert_parallel", V),
    ("--torch-dtype", "dtype", V),
    ("--bf16", "bf16", OB),
    ("--fp16", "fp16", OB),
    # the training strategy (launchers.strategy): transformers TrainingArguments --deepspeed (a path
    # or inline JSON; DeepSpeed's add_config_arguments makes it a bare switch beside
    # --deepspeed_config), --fsdp / --fsdp_config; DeepSpeed-Chat --zero_stage, Megatron-DeepSpeed
    # --zero-stage; Megatron-LM --use-distributed-optimizer
    ("--deepspeed", "deepspeed", V),
    ("--deepspeed-config --deepscale-config", "deepspeed_config", V),
    ("--zero-stage", "zero_stage", V),
    ("--fsdp", "fsdp", V),
    ("--fsdp-config", "fsdp_config", V),
    ("--use-distributed-optimizer", "distributed_optimizer", B),
    # PEFT: TRL ModelConfig (--use_peft, --lora_r, --load_in_4bit, --load_in_8bit), peft's examples
    # (--use_peft_lora, --use_4bit_quantization), LLaMA-Factory (--finetuning_type, --quantization_bit)
    ("--use-peft --use-peft-lora --use-lora", "use_peft", OB),
    ("--lora-r --lora-rank", "lora_r", V),
    ("--load-in-4bit --use-4bit-quantization", "load_in_4bit", OB),
    ("--load-in-8bit --use-8bit-quantization", "load_in_8bit", OB),
    ("--quantization-bit", "quantization_bit", V),
    ("--finetuning-type", "finetuning_type", V),
    # the network's shape (launchers.arch_flags): NVIDIA/Megatron-LM megatron/training/arguments.py
    # (000c4ac24f61159c138b0975def722c65245983c) _add_network_size_args, _add_tokenizer_args,
    # _add_moe_args; --group-query-attention, --swiglu and --untie-... are store_true switches
    ("--num-layers", "arch.layers", V),
    ("--hidden-size", "arch.hidden", V),
    ("--num-attention-heads", "arch.heads", V),
    ("--num-query-groups", "arch.query_groups", V),
    ("--group-query-attention", "arch.gqa", B),
    ("--kv-channels", "arch.kv_channels", V),
    ("--ffn-hidden-size", "arch.ffn", V),
    ("--swiglu", "arch.gated", B),
    ("--vocab-size", "arch.vocab", V),
    ("--padded-vocab-size", "arch.padded_vocab", V),
    ("--untie-embeddings-and-output-weights", "arch.untied", B),
    ("--num-experts", "arch.experts", V),
    ("--moe-ffn-hidden-size", "arch.moe_ffn", V),
    ("--moe-router-topk", "arch.top_k", V),
    ("--moe-layer-freq", "arch.moe_every", V),
    ("--moe-shared-expert-intermediate-size", "arch.shared_expert_ffn", V),
    ("--multi-latent-attention", "arch.mla", B),
    ("--encoder-num-layers --decoder-num-layers", "arch.enc_dec", V),
)

GENERIC_ENV = ("MODEL_ID", "HF_MODEL_ID", "MODEL_NAME", "MODEL", "MODEL_PATH")
"""Env names custom servers and training scripts read a model id from, in the order tried."""

GENERIC_FLAGS = _table(
    # the model flags custom serving scripts use, read only when no known launcher runs
    (
        "--model-id --model --model-name --model-path --model-name-or-path "
        "--pretrained-model-name-or-path --base-model --ckpt --checkpoint",
        "model", V,
    ),
)

HYDRA_KEYS: tuple[tuple[str, str], ...] = (
    # (key suffix, field): NeMo / Lightning overrides such as model.tensor_model_parallel_size=4
    ("tensor_model_parallel_size", "tensor_parallel"),
    ("pipeline_model_parallel_size", "pipeline_parallel"),
    ("expert_model_parallel_size", "expert_parallel"),
    ("trainer.num_nodes", "nnodes"),
    ("trainer.devices", "nproc"),
    ("trainer.precision", "precision"),
    ("model.restore_from_path", "model"),
)

ARCH_HYDRA_KEYS: tuple[tuple[str, str], ...] = (
    # (key, architecture field): NeMo 1 model config keys, e.g. NVIDIA/NeMo
    # examples/nlp/language_modeling/conf/megatron_llama_config.yaml
    # (fec822132a91ddf7ed7b9bf196b5efcb96827cb9): num_layers, hidden_size, ffn_hidden_size,
    # num_attention_heads, num_query_groups ("If None, normal attention is used"), kv_channels,
    # activation ('fast-swiglu', ...), share_embeddings_and_output_weights; the MoE keys are
    # Megatron-core TransformerConfig's (num_moe_experts, moe_ffn_hidden_size, moe_router_topk)
    ("model.num_layers", "arch.layers"),
    ("model.hidden_size", "arch.hidden"),
    ("model.num_attention_heads", "arch.heads"),
    ("model.num_query_groups", "arch.query_groups"),
    ("model.kv_channels", "arch.kv_channels"),
    ("model.ffn_hidden_size", "arch.ffn"),
    ("model.activation", "arch.activation"),
    ("model.share_embeddings_and_output_weights", "arch.shared_embeddings"),
    ("model.num_moe_experts", "arch.experts"),
    ("model.moe_ffn_hidden_size", "arch.moe_ffn"),
    ("model.moe_router_topk", "arch.top_k"),
)
"""NeMo Hydra overrides (``model.num_layers=32``) that state the network's shape."""
