"""Prefill/decode deployments: several servers in roles and the routers in front, read from
one launch script and checked as a whole (docs/disaggregation.md)."""
