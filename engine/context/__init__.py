"""What fills the context: token counts, turns, the budget, offload policy, compaction, summaries."""
