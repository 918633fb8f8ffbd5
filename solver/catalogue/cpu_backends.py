"""The CPU platform's attention back-end, declared once for every check that reads it.

SGLang spells it twice, depending on when a check runs: `handle_cpu_backends` (the platform
handler, before the model overrides) names an unset base back-end intel_amx (torch_native
on an Arm host); the attention handler's platform fall-back later makes intel_amx
torch_native on a host without AMX. A check that runs between the two (the deterministic
handler, 0.5.23's NVFP4 prefill handler) reads and quotes intel_amx (measured on the
oracle's host); a check after the attention handler reads torch_native (the oracle's host
has no AMX). Which one finally runs depends on the host, which meshsat does not see, so
R-ATTN-BACKEND leaves the field unset and the checks read these constants instead.
"""

from __future__ import annotations

#: `handle_cpu_backends`' name for an unset base back-end: what the deterministic and NVFP4
#: prefill checks read, since they run before the AMX fall-back.
PLATFORM_PICK = "intel_amx"
#: The back-end after the attention handler's fall-back on a host without AMX: what checks
#: after that handler read, and what a report names (`attention_default.backend_used`).
AFTER_FALLBACK = "torch_native"
