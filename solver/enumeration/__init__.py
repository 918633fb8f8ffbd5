"""enumerate and count: every legal layout for N GPUs, streamed by generated Python loops.

`space` declares what varies, `problem` specialises the catalogue to one base config,
`completions` solves the flag part once per numeric signature, `codegen` writes the loops,
`where` and `node_locality` add the user's filters, `layouts` is the API.
"""
