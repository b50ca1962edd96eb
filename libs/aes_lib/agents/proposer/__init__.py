"""The proposer: workspace, harness tools, agentic episode, Prompt / Prompt + Env
Feedback baselines, candidate publication, and the mode comparison."""
