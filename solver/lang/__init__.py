"""The rule language and its vocabulary: the bottom layer, imported by everything else.

`expr` (the typed expression tree and its closed set of node types), `visitor` (the one
protocol every walker of that tree follows), `rule` (a rule and a resolution step),
`config` and `model_spec` (the input models), `fields` (field specs and the `F` namespace)
and `derived` (the widths SGLang computes). Nothing here knows a back-end; see
docs/architecture.md.
"""
