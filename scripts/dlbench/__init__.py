"""dlbench's Python side: reading Google Benchmark JSON, figures, comparisons."""
