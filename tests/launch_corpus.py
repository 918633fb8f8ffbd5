"""Launch commands in the shapes people paste them, each with the layout it must read.

Written for this project from the forms seen in public SGLang threads, model cards and docs
(facts, not text): continuations in every form, env prefixes, docker wrappers, redirections,
multi-node scripts, deprecated spellings, shell variables.
"""

from __future__ import annotations

from typing import Any

L = "python3 -m sglang.launch_server"
V3 = "--model-path deepseek-ai/DeepSeek-V3 --trust-remote-code"

CORPUS: list[tuple[str, dict[str, Any]]] = [
    (f"{L} --model-path meta-llama/Llama-3.1-8B-Instruct --port 30000", {}),
    (f"{L} {V3} --tp 8", {"tp_size": 8}),
    (f"python -m sglang.launch_server {V3} --tp-size 16 --nnodes 2", {"tp_size": 16, "nnodes": 2}),
    (
        f"{L} {V3} \\\n  --tp 8 \\\n  --dp 8 \\\n  --enable-dp-attention",
        {"tp_size": 8, "dp_size": 8, "enable_dp_attention": True},
    ),
    (
        f"{L} {V3} \\\n--tp-size 8 \\\n--enable-dp-attention \\\n--dp 4",
        {"tp_size": 8, "enable_dp_attention": True, "dp_size": 4},
    ),
    (f"{L} {V3} --tp 8 \\", {"tp_size": 8}),
    (f"{L} {V3} --tp 8 \\ \n --ep-size 8", {"tp_size": 8, "ep_size": 8}),
    (
        f"{L} {V3} --tp 8 --attn-dp-size 8 --ep-size 8 --moe-a2a-backend deepep",
        {"tp_size": 8, "attn_dp_size": 8, "ep_size": 8, "moe_a2a_backend": "deepep"},
    ),
    (f"CUDA_VISIBLE_DEVICES=0,1,2,3 {L} --model-path Qwen/Qwen3-30B-A3B --tp 4", {"tp_size": 4}),
    (f"SGLANG_ENABLE_CP_V2=0 {L} {V3} --tp 8", {"tp_size": 8, "env_enable_cp_v2": False}),
    (f"export SGLANG_ENABLE_CP_V2=1\n{L} {V3} --tp 8", {"tp_size": 8, "env_enable_cp_v2": True}),
    (f"{L} {V3} --tp 8 > server.log 2>&1 &", {"tp_size": 8}),
    (f"nohup {L} {V3} --tp 8 --dp 2 >> out.log 2>&1 &", {"tp_size": 8, "dp_size": 2}),
    (
        f"{L} {V3} --tp=8 --dp=2 --enable-dp-attention",
        {"tp_size": 8, "dp_size": 2, "enable_dp_attention": True},
    ),
    (f'{L} --model-path "/models/DeepSeek V3" --tp 8', {"tp_size": 8}),
    (f"{L} --model-path '/models/a b' --tp '4'", {"tp_size": 4}),
    (
        "docker run --gpus all --shm-size 32g -p 30000:30000 -v ~/.cache/huggingface:/root/.cache/"
        "huggingface --ipc=host lmsysorg/sglang:latest python3 -m sglang.launch_server "
        "--model-path deepseek-ai/DeepSeek-V3 --tp 8 --host 0.0.0.0 --port 30000",
        {"tp_size": 8},
    ),
    (
        "docker run --gpus all -e SGLANG_ENABLE_CP_V2=1 --ipc=host lmsysorg/sglang:v0.5.23 \\\n"
        "  python3 -m sglang.launch_server --model-path x --tp 4 --attn-cp-size 2",
        {"tp_size": 4, "attn_cp_size": 2, "env_enable_cp_v2": True},
    ),
    (
        "sglang serve --model-path Qwen/Qwen3-235B-A22B --tp 8 --ep-size 8",
        {"tp_size": 8, "ep_size": 8},
    ),
    (
        "python -m sglang_router.launch_server --model-path x --dp 4 --tp 2",
        {"dp_size": 4, "tp_size": 2},
    ),
    (
        f"{L} {V3} --tp 16 --nnodes 2 --node-rank $NODE_RANK --dist-init-addr $MASTER_ADDR:5000",
        {"tp_size": 16, "nnodes": 2},
    ),
    (
        f"{L} {V3} --tp 16 --nnodes 2 --node-rank $1 --dist-init-addr 10.0.0.1:5000",
        {"tp_size": 16, "nnodes": 2},
    ),
    (f"{L} {V3} --tp ${{TP}} --dp 2", {"dp_size": 2}),
    (f"{L} {V3} --tp $(nvidia-smi -L | wc -l)", {}),
    (f"{L} {V3} --tp 8 --enable-ep-moe", {"tp_size": 8, "ep_size": 8}),
    (
        f"{L} {V3} --tp 8 --enable-deepep-moe --enable-dp-attention --dp 8",
        {"tp_size": 8, "moe_a2a_backend": "deepep", "enable_dp_attention": True, "dp_size": 8},
    ),
    (
        f"{L} {V3} --tp 4 --elastic-ep-backend mooncake --cuda-graph-backend-decode disabled",
        {"tp_size": 4, "elastic_ep_backend": "mooncake", "cuda_graph_backend_decode": "disabled"},
    ),
    (
        f"{L} {V3} --tp 8 --enable-prefill-cp --cp-strategy zigzag --attn-cp-size 8",
        {"tp_size": 8, "enable_prefill_cp": True, "cp_strategy": "zigzag", "attn_cp_size": 8},
    ),
    (
        f"{L} {V3} --tp 8 --enable-nsa-prefill-context-parallel --nsa-prefill-cp-mode "
        "round-robin-split",
        {
            "tp_size": 8,
            "enable_dsa_prefill_context_parallel": True,
            "dsa_prefill_cp_mode": "round-robin-split",
        },
    ),
    (
        f"{L} {V3} --tp 8 --dcp-size 2 --dcp-comm-backend a2a",
        {"tp_size": 8, "dcp_size": 2, "dcp_comm_backend": "a2a"},
    ),
    (
        f"{L} {V3} --tp 8 --cuda-graph-bs 1 2 4 8 --mem-fraction-static 0.85 --dp 2",
        {"tp_size": 8, "dp_size": 2},
    ),
    (
        f"{L} {V3} --tp 8 --enable-eplb --ep-size 8 --moe-a2a-backend deepep",
        {"tp_size": 8, "enable_eplb": True, "ep_size": 8, "moe_a2a_backend": "deepep"},
    ),
    (f"# launch the prefill server\n{L} {V3} --tp 8  # eight GPUs\n", {"tp_size": 8}),
    (
        "#!/bin/bash\nset -e\nMODEL=deepseek-ai/DeepSeek-V3\n"
        f"{L} --model-path $MODEL --tp 8 --pp 2",
        {"tp_size": 8, "pp_size": 2},
    ),
    (
        f"cd /workspace && {L} {V3} --tp 8 --dp 2 --enable-dp-attention",
        {"tp_size": 8, "dp_size": 2, "enable_dp_attention": True},
    ),
    (
        f"{L} {V3} --tp 4 --pp-size 2 --disable-cuda-graph",
        {"tp_size": 4, "pp_size": 2, "disable_cuda_graph": True},
    ),
    (
        f"exec {L} {V3} --tp 2 --moe-dp-size 2 --attn-cp-size 2 --enable-prefill-cp --cp-strategy "
        "interleave",
        {
            "tp_size": 2,
            "moe_dp_size": 2,
            "attn_cp_size": 2,
            "enable_prefill_cp": True,
            "cp_strategy": "interleave",
        },
    ),
    (
        f"{L} {V3} --tp 8 --dwdp-size 8 --disaggregation-mode prefill",
        {"tp_size": 8, "dwdp_size": 8, "disaggregation_mode": "prefill"},
    ),
    (f"/usr/bin/python3.11 -m sglang.launch_server {V3} --tp 2", {"tp_size": 2}),
    (f"env SGLANG_ENABLE_CP_V2=1 {L} {V3} --tp 2", {"tp_size": 2, "env_enable_cp_v2": True}),
    (
        f"{L} {V3} --tp 8 --moe-dense-tp-size 1 --enable-dp-lm-head --dp 8 --enable-dp-attention",
        {
            "tp_size": 8,
            "moe_dense_tp_size": 1,
            "enable_dp_lm_head": True,
            "dp_size": 8,
            "enable_dp_attention": True,
        },
    ),
    (f"{L} {V3}\t--tp\t8", {"tp_size": 8}),
    (f"{L} {V3} --tp 8 --no-dcp-replicate-q-proj", {"tp_size": 8, "dcp_replicate_q_proj": False}),
]

#: One job over two nodes: each line a node, the job reads as node 0's layout.
MULTI_NODE = (
    f"{L} {V3} --tp 16 --nnodes 2 --node-rank 0 --dist-init-addr 10.0.0.1:5000 &\n"
    f"{L} {V3} --tp 16 --nnodes 2 --node-rank 1 --dist-init-addr 10.0.0.1:5000 &\n"
)

#: Commands as copied from terminals, documents and manifests (issue 23): each shape, the
#: layout it must read and a piece of the note that says how it was read (None: no note).
K8S = """apiVersion: apps/v1
kind: Deployment
spec:
  template:
    spec:
      containers:
        - name: sglang
          image: lmsysorg/sglang:latest
          env:
            - name: SGLANG_ENABLE_CP_V2
              value: "1"
          command:
            - python3
            - -m
            - sglang.launch_server
          args:
            - --model-path
            - deepseek-ai/DeepSeek-V3
            - --tp
            - "8"
            - --attn-cp-size
            - "2"
"""
K8S_FLOW = """containers:
  - name: sglang
    command: ["python3", "-m", "sglang.launch_server", "--model-path", "x", "--tp-size", "4",
              "--ep-size", "4"]
"""
K8S_SHELL = """spec:
  containers:
    - name: sglang
      command: ["/bin/bash", "-c"]
      args:
        - |
          pip list | grep sglang
          python3 -m sglang.launch_server --model-path x --tp 8 --dp 2 --enable-dp-attention
"""
COMPOSE = """services:
  sglang:
    image: lmsysorg/sglang:latest
    environment:
      SGLANG_ENABLE_CP_V2: "0"
    command: python3 -m sglang.launch_server --model-path x --tp 2 --pp-size 2
"""
SHAPES: list[tuple[str, str, dict[str, Any], str | None]] = [
    ("prompt $", f"$ {L} {V3} --tp 8", {"tp_size": 8}, "terminal prompt"),
    (
        "prompt user@host",
        f"user@gpu-01:~$ {L} {V3} --tp 4 --dp 2",
        {"tp_size": 4, "dp_size": 2},
        "terminal prompt",
    ),
    (
        "prompt root#",
        f"root@node0:/sgl-workspace# {L} {V3} --tp 8",
        {"tp_size": 8},
        "terminal prompt",
    ),
    ("prompt venv", f"(sglang) $ {L} {V3} --tp 2", {"tp_size": 2}, "terminal prompt"),
    (
        "prompt multi-line",
        f"$ {L} {V3} \\\n    --tp 8 \\\n    --ep-size 8",
        {"tp_size": 8, "ep_size": 8},
        "terminal prompt",
    ),
    (
        "export one line",
        f"export SGLANG_ENABLE_CP_V2=1 {L} {V3} --tp 8",
        {"tp_size": 8, "env_enable_cp_v2": True},
        None,
    ),
    ("bare ${ARGS}", f"{L} {V3} --tp 8 ${{ARGS}}", {"tp_size": 8}, "${ARGS}"),
    ("bare $EXTRA mid-line", f"{L} {V3} $EXTRA_ARGS --tp 4", {"tp_size": 4}, "$EXTRA_ARGS"),
    ("placeholder", f"{L} --model-path <MODEL_PATH> --tp 8", {"tp_size": 8}, None),
    ("placeholder value", f"{L} --model-path x --tp <TP_SIZE> --dp 2", {"dp_size": 2}, "<TP_SIZE>"),
    ("placeholder dashes", f"{L} --model-path <your-model> --tp 2", {"tp_size": 2}, None),
    (
        "stray dash at line end",
        f"{L} {V3} --tp 8 -\n  --dp 2 --enable-dp-attention",
        {"tp_size": 8, "dp_size": 2, "enable_dp_attention": True},
        "lone '-'",
    ),
    (
        "stray dash word",
        f"{L} {V3} --tp 8 - --ep-size 8",
        {"tp_size": 8, "ep_size": 8},
        "stray '-'",
    ),
    (
        "kubernetes block lists",
        K8S,
        {"tp_size": 8, "attn_cp_size": 2, "env_enable_cp_v2": True},
        "manifest",
    ),
    ("kubernetes flow list", K8S_FLOW, {"tp_size": 4, "ep_size": 4}, "manifest"),
    (
        "kubernetes sh -c",
        K8S_SHELL,
        {"tp_size": 8, "dp_size": 2, "enable_dp_attention": True},
        None,
    ),
    ("compose string", COMPOSE, {"tp_size": 2, "pp_size": 2, "env_enable_cp_v2": False}, None),
    (
        "bench_one_batch_server",
        "python3 -m sglang.bench_one_batch_server --model-path x --tp 8 --batch-size 1 16 64 "
        "--input-len 1024 --output-len 8 --base-url http://localhost:30000",
        {"tp_size": 8},
        None,
    ),
    (
        "benchmark.one_batch",
        "python -m sglang.benchmark.one_batch --model-path x --tp 2 "
        "--batch-size 4 --correctness-test",
        {"tp_size": 2},
        None,
    ),
    (
        "choice flag from a variable",
        f"{L} {V3} --tp 8 --kv-cache-dtype $KV_CACHE_DTYPE",
        {"tp_size": 8},
        "$KV_CACHE_DTYPE",
    ),
    (
        "layout choice from a variable",
        f"{L} {V3} --tp 8 --moe-a2a-backend ${{A2A}}",
        {"tp_size": 8},
        "${A2A}",
    ),
    (
        "config file missing",
        f"{L} --config /nonexistent/sglang.yaml --tp 2",
        {"tp_size": 2},
        "no such file",
    ),
    ("serve config file missing", "sglang serve --config ./nope.yaml", {}, "no such file"),
    (
        "node launched over ssh, quoted",
        f'ssh node1 "{L} {V3} --tp 16 --nnodes 2 --node-rank 1 --dist-init-addr 10.0.0.1:5000"',
        {"tp_size": 16, "nnodes": 2, "node_rank": 1},
        None,
    ),
    ("launch in bash -c", f"bash -c '{L} --model-path x --tp 4'", {"tp_size": 4}, None),
    (
        "sizes in the script's variables",
        f'tp_size=16\nexport NODES=2\n{L} {V3} --tp "$tp_size" --nnodes ${{NODES}} '
        "--node-rank ${NODE_RANK:-0}",
        {"tp_size": 16, "nnodes": 2, "node_rank": 0},
        "set on line 1",
    ),
]
