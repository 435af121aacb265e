"""graphtrain-inspect sample: a tiny MoE transformer trained the way graph-based
distributed trainers do it (one traced joint graph, a pass pipeline, FSDP + EP
collectives inside the graph).  Only torch and the standard library are used."""
