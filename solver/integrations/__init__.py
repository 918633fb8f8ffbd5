"""meshsat inside the tools people already run: SGLang's start-up (a plugin and the
`meshsat launch` wrapper share `launch_guard`). Nothing here is imported by `meshsat.solver`
itself; SGLang is imported only by `sglang_plugin.register`, which SGLang calls."""
