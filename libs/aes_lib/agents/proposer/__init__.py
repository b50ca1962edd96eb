"""The proposer: one boundary (``boundary.generate(assignment, resources) -> Proposal``)
over three registered modes (Prompt and Prompt + Env Feedback baselines, the agentic
harness with its workspace and tools), candidate publication, and the mode comparison."""
