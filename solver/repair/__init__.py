"""fix: the nearest valid layout, as a MaxSMT search over the catalogue in Z3.

`objective` defines what "nearest" means, `problem` builds the cached hard part,
`search` descends on it, `results` holds the values returned, `fix` is the API.
"""
