"""Optional integrations; each module imports its extra."""
