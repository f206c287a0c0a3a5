"""How one translated word was made: attribution graphs through cross-attention (docs/GRAPHS.md).

replacement.py freezes the sentence's attention patterns and LayerNorm scales and puts each FFN's
transcoder and error node in its place, so the model is linear in its nodes at one output position;
nodes.py lays the nodes out (features, errors, tokens, the logit) over both stacks and the concatenated
source and prefix; attribution.py reads each node's direct effect on each feature and on the logit off
batched backward passes; influence.py ranks, prunes and scores the graph as circuit-tracer does;
export.py writes circuit-tracer's graph JSON; step.py turns a sentence, a position and a foil into the
question; intervene.py removes or clamps feature nodes in the model and sets its answer beside the
graph's prediction (and checks that the nodes the graph ranks first matter most); hooks.py holds the
thread-owned hooks the replacement runs under. job.py runs it as the command's study (GRAPH) and as the
app's (GRAPH_THRESHOLDS: one graph pruned at several node thresholds); rows.py reads a graph's JSON back
as plain rows for a page.
"""
