"""meshsat solver: the SGLang parallel-layout rules, validate, fix, enumerate, groups."""
