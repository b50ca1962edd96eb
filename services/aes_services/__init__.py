"""The services of the pipeline, one module each."""
