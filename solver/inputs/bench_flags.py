"""The benchmarks that start an SGLang engine in-process and take the server's flags.

`python -m sglang.bench_one_batch_server --model-path X --tp 8 --batch-size 1 ...` is a
launch command too: the layout flags are the server's. Each benchmark adds flags of its own
(its `BenchArgs`), which no server parser has; they are read past here, not reported as
unknown. Taken from SGLang 0.5.23's `sglang/benchmark/*.py` (`BenchArgs.add_cli_args`);
the value is how many words a flag takes (0 none, 1 one, 2 any number).
"""

from __future__ import annotations

_ONE_BATCH_SERVER = {
    **dict.fromkeys(("--batch-size", "--input-len", "--output-len"), 2),
    **dict.fromkeys(("--profile-activities", "--server-args-for-metrics", "--lora-name"), 2),
    **dict.fromkeys(
        (
            "--disable-ignore-eos",
            "--return-logprob",
            "--skip-warmup",
            "--skip-token-capacity-check",
            "--show-report",
            "--profile",
            "--profile-by-stage",
            "--apply-chat-template",
            "--parallel-batch",
            "--no-append-to-github-summary",
            "--fake-prefill",
            "--flush-hicache-storage",
            "--enable-multi-batch",
        ),
        0,
    ),
    **dict.fromkeys(
        (
            "--run-name",
            "--temperature",
            "--client-stream-interval",
            "--input-len-step-percentage",
            "--input-len-list",
            "--base-url",
            "--local-tokenizer-path",
            "--profile-start-step",
            "--profile-steps",
            "--profile-prefix",
            "--profile-output-dir",
            "--dataset-path",
            "--dataset-name",
            "--fixed-prompt-file",
            "--gsp-num-groups",
            "--gsp-system-prompt-len",
            "--gsp-question-len",
            "--gsp-output-len",
            "--result-filename",
            "--pydantic-result-filename",
            "--seed",
            "--cache-hit-rate",
            "--backend",
            "--lora-request-distribution",
            "--lora-zipf-alpha",
        ),
        1,
    ),
}
_ONE_BATCH = {
    **dict.fromkeys(("--batch-size", "--input-len", "--output-len", "--profile-activities"), 2),
    **dict.fromkeys(("--correctness-test", "--profile", "--profile-record-shapes"), 0),
    **dict.fromkeys(
        (
            "--run-name",
            "--prompt-filename",
            "--result-filename",
            "--cut-len",
            "--log-decode-step",
            "--profile-stage",
            "--profile-prefix",
            "--profile-start-step",
            "--profile-steps",
        ),
        1,
    ),
}
_OFFLINE_THROUGHPUT = {
    "--profile-activities": 2,
    **dict.fromkeys(
        (
            "--disable-ignore-eos",
            "--apply-chat-template",
            "--profile",
            "--skip-warmup",
            "--do-not-exit",
            "--return-logprob",
        ),
        0,
    ),
    **dict.fromkeys(
        (
            "--backend",
            "--result-filename",
            "--dataset-name",
            "--dataset-path",
            "--num-prompts",
            "--sharegpt-output-len",
            "--sharegpt-context-len",
            "--random-input-len",
            "--random-output-len",
            "--random-range-ratio",
            "--gsp-num-groups",
            "--gsp-prompts-per-group",
            "--gsp-system-prompt-len",
            "--gsp-question-len",
            "--gsp-output-len",
            "--seed",
            "--extra-request-body",
            "--profile-steps",
            "--prompt-suffix",
            "--logprob-start-len",
        ),
        1,
    ),
}

#: module -> its own flags; the old `sglang.bench_*` paths still run the same code.
BENCH_FLAGS: dict[str, dict[str, int]] = {
    "sglang.bench_one_batch_server": _ONE_BATCH_SERVER,
    "sglang.benchmark.one_batch_server": _ONE_BATCH_SERVER,
    "sglang.bench_one_batch": _ONE_BATCH,
    "sglang.benchmark.one_batch": _ONE_BATCH,
    "sglang.bench_offline_throughput": _OFFLINE_THROUGHPUT,
    "sglang.benchmark.offline_throughput": _OFFLINE_THROUGHPUT,
}
