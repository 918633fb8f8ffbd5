"""validate and check: the report of every violated rule, and the conflict explanation."""
